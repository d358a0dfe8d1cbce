"""Exports tiny, randomly initialised Hugging Face transformers models (no
downloads) with varuna.export, as a user would: the wrapper returns the loss
the model computes from its labels; the example inputs go to
OUTDIR/NAME.inputs/<input>.npy. With --no-dropout every dropout probability
is 0 and the files are NAME-nodrop.*: a deterministic forward pass, to compare
with onnxruntime. Usage: hf_models.py OUTDIR [--no-dropout] NAME..."""
import inspect
import os
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
import transformers as T  # noqa: E402

import varuna  # noqa: E402

T.logging.set_verbosity_error()
V = 100
EAGER = dict(attn_implementation="eager")


class TextLM(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, labels):
        return self.m(input_ids=input_ids, labels=labels).loss


class PreTraining(torch.nn.Module):
    """BERT pre-training: the masked-LM loss over the masked tokens plus the
    next-sentence loss over the examples (two means counting different
    labels)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, labels, next_sentence_label):
        return self.m(input_ids=input_ids, labels=labels,
                      next_sentence_label=next_sentence_label).loss


class Classify(torch.nn.Module):
    """A sequence classifier with a padding mask (its labels: one class per
    example)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, labels):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


class Vision(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, pixel_values, labels):
        return self.m(pixel_values=pixel_values, labels=labels).loss


class MaskedAutoencoder(torch.nn.Module):
    """ViT-MAE pre-training: patches kept by the argsort of per-example
    noise (an input, so both runs mask alike), the reconstruction loss over
    the masked ones."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, pixel_values, noise):
        return self.m(pixel_values=pixel_values, noise=noise).loss


def text(cls, cfg):
    ids = torch.randint(0, V, (2, 16))
    return TextLM(cls(cfg)), (ids, ids.clone())


def pretraining(cls, cfg):
    ids = torch.randint(0, V, (2, 16))
    return PreTraining(cls(cfg)), (ids, ids.clone(), torch.randint(0, 2, (2,)))


def classify(cls, cfg):
    ids = torch.randint(0, V, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0  # padding
    return Classify(cls(cfg)), (ids, mask, torch.tensor([0, cfg.num_labels - 1]))


def replaced(cls, cfg):
    """ELECTRA's discriminator: a 0/1 label per token (replaced or not),
    its loss over the tokens the padding mask keeps (x[mask] in HF)."""
    ids = torch.randint(0, V, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0
    return Classify(cls(cfg)), (ids, mask, torch.randint(0, 2, (2, 16)))


class Speech(torch.nn.Module):
    """A CTC speech recognizer from raw audio (its labels: padded token
    ids; Hugging Face's CTC loss drops the blank / pad ones by
    masked_select)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_values, labels):
        return self.m(input_values=input_values, labels=labels).loss


def vision(cls, cfg):
    return Vision(cls(cfg)), (torch.randn(2, 3, 32, 32), torch.randint(0, 10, (2,)))


MODELS = {
    "gpt2": lambda: text(T.GPT2LMHeadModel, T.GPT2Config(
        vocab_size=V, n_positions=32, n_embd=32, n_layer=2, n_head=4, **EAGER)),
    "llama": lambda: text(T.LlamaForCausalLM, T.LlamaConfig(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        tie_word_embeddings=True, **EAGER)),
    "mistral": lambda: text(T.MistralForCausalLM, T.MistralConfig(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        sliding_window=8, **EAGER)),
    "gptneo": lambda: text(T.GPTNeoForCausalLM, T.GPTNeoConfig(
        vocab_size=V, hidden_size=32, num_layers=2, num_heads=4, max_position_embeddings=32,
        attention_types=[[["global", "local"], 1]], window_size=8, **EAGER)),
    "gptj": lambda: text(T.GPTJForCausalLM, T.GPTJConfig(
        vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=32, rotary_dim=4, **EAGER)),
    "opt": lambda: text(T.OPTForCausalLM, T.OPTConfig(
        vocab_size=V, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=32, word_embed_proj_dim=32, **EAGER)),
    "bert": lambda: text(T.BertForMaskedLM, T.BertConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=32, **EAGER)),
    # layerdrop 0: a random LayerDrop is decided in Python, which a trace
    # keeps fixed (varuna.export warns).
    "wav2vec2": lambda: (Speech(T.Wav2Vec2ForCTC(T.Wav2Vec2Config(
        vocab_size=12, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, conv_dim=(8, 8), conv_stride=(5, 2), conv_kernel=(10, 3),
        num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, mask_time_prob=0.0,
        layerdrop=0.0, ctc_loss_reduction="mean", pad_token_id=0, **EAGER))),
        (torch.randn(2, 400), torch.tensor([[1, 2, 3], [4, 5, 6]]))),
    "vitmae": lambda: (MaskedAutoencoder(T.ViTMAEForPreTraining(T.ViTMAEConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, decoder_hidden_size=16, decoder_num_hidden_layers=1,
        decoder_num_attention_heads=2, decoder_intermediate_size=32, mask_ratio=0.5, **EAGER))),
        (torch.randn(2, 3, 32, 32), torch.rand(2, 16))),
    "electra-pretraining": lambda: replaced(T.ElectraForPreTraining, T.ElectraConfig(
        vocab_size=V, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32, **EAGER)),
    "bert-cls": lambda: classify(T.BertForSequenceClassification, T.BertConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=32, num_labels=3, **EAGER)),
    "bert-pretraining": lambda: pretraining(T.BertForPreTraining, T.BertConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=32, **EAGER)),
    "roberta": lambda: text(T.RobertaForMaskedLM, T.RobertaConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=40, **EAGER)),
    "distilbert": lambda: text(T.DistilBertForMaskedLM, T.DistilBertConfig(
        vocab_size=V, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
        max_position_embeddings=32, **EAGER)),
    "vit": lambda: vision(T.ViTForImageClassification, T.ViTConfig(
        image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, num_labels=10, **EAGER)),
    "swin": lambda: vision(T.SwinForImageClassification, T.SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
        window_size=4, num_labels=10, **EAGER)),
    "resnet": lambda: vision(T.ResNetForImageClassification, T.ResNetConfig(
        num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=10)),
    "t5": lambda: text(T.T5ForConditionalGeneration, T.T5Config(
        vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
        decoder_start_token_id=0, pad_token_id=0)),
    "bart": lambda: text(T.BartForConditionalGeneration, T.BartConfig(
        vocab_size=V, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        max_position_embeddings=64, **EAGER)),
    "beit": lambda: vision(T.BeitForImageClassification, T.BeitConfig(
        image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, num_labels=10, use_relative_position_bias=True, **EAGER)),
    "funnel": lambda: text(T.FunnelForMaskedLM, T.FunnelConfig(
        vocab_size=V, d_model=16, n_head=2, d_head=8, d_inner=32, block_sizes=[1, 1],
        num_decoder_layers=1)),
    "mobilevit": lambda: vision(T.MobileViTForImageClassification, T.MobileViTConfig(
        image_size=32, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
        num_labels=10, **EAGER)),
    "mixtral": lambda: text(T.MixtralForCausalLM, T.MixtralConfig(
        vocab_size=V, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, intermediate_size=32, num_local_experts=4, num_experts_per_tok=2,
        max_position_embeddings=64, output_router_logits=True,
        experts_implementation="batched_mm", **EAGER)),
    "bit": lambda: vision(T.BitForImageClassification, T.BitConfig(
        embedding_size=32, hidden_sizes=[32, 64], depths=[1, 1], num_labels=10, num_groups=8)),
    "bloom": lambda: text(T.BloomForCausalLM, T.BloomConfig(
        vocab_size=V, hidden_size=32, n_layer=2, n_head=4, **EAGER)),
    "falcon": lambda: text(T.FalconForCausalLM, T.FalconConfig(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, **EAGER)),
    "qwen2": lambda: text(T.Qwen2ForCausalLM, T.Qwen2Config(
        vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32, **EAGER)),
    "albert": lambda: text(T.AlbertForMaskedLM, T.AlbertConfig(
        vocab_size=V, embedding_size=16, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=32, **EAGER)),
    "deberta": lambda: text(T.DebertaV2ForMaskedLM, T.DebertaV2Config(
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=32, **EAGER)),
    "mobilenet": lambda: vision(T.MobileNetV2ForImageClassification, T.MobileNetV2Config(
        image_size=32, num_labels=10, depth_multiplier=0.35)),
    "regnet": lambda: vision(T.RegNetForImageClassification, T.RegNetConfig(
        embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], groups_width=8, num_labels=10)),
    "poolformer": lambda: vision(T.PoolFormerForImageClassification, T.PoolFormerConfig(
        hidden_sizes=[8, 16, 16, 16], depths=[1, 1, 1, 1], num_labels=10, num_encoder_blocks=4)),
}

def no_dropout(model):
    """Sets every dropout probability to 0 (nn.Dropout modules and the float
    `dropout` / `attention_dropout` attributes HF layers pass to
    F.dropout, and stochastic depth's `drop_prob`: Swin's drop path), so
    that the exported graph is deterministic."""
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        for attr in ("dropout", "attention_dropout", "activation_dropout", "drop_prob"):
            if isinstance(getattr(m, attr, None), float):
                setattr(m, attr, 0.0)
    return model


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    args = sys.argv[2:]
    deterministic = "--no-dropout" in args
    for name in [a for a in args if a != "--no-dropout"]:
        torch.manual_seed(0)
        model, inputs = MODELS[name]()
        if deterministic:
            model = no_dropout(model)
            name += "-nodrop"
        varuna.export(model, inputs, os.path.join(out, name + ".onnx"))
        # The example inputs, for the forward checks against onnxruntime.
        os.makedirs(os.path.join(out, name + ".inputs"), exist_ok=True)
        arg_names = list(inspect.signature(model.forward).parameters)
        for arg, t in zip(arg_names, inputs):
            np.save(os.path.join(out, name + ".inputs", arg + ".npy"), t.numpy())


if __name__ == "__main__":
    main()
