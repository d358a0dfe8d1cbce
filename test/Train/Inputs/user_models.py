"""Models written as a user would, with PyTorch functions that have no
varuna op of their own (imported as compositions; include/varuna/Import/
Decompose.h). Each factory returns (model, example inputs) like the entries
of hf_models.MODELS, for hf_oracle.py --module user_models.py:FACTORY.

functions       TorchScript: RMSNorm, mish / hardswish / elu / selu / celu /
                leaky_relu / logsigmoid, GLU, einsum attention, logsumexp,
                var / std, vector norms, GroupNorm / InstanceNorm, cosine
                similarity, nn.Bilinear, adaptive max pooling, and a loss
                adding mse, smooth L1, Huber, L1, binary cross-entropy (with
                logits and on probabilities), KL divergence (mean and
                batchmean), a sum divided by x.shape[0], and cross-entropy
functions_onnx  the part the ONNX exporter (opset 17) takes: no RMSNorm,
                no Bilinear, no L1 / smooth L1 / Huber / binary
                cross-entropy on probabilities (torch cannot export them)
shapes          TorchScript and ONNX: pixel_shuffle / pixel_unshuffle
                (DepthToSpace), transposed convolution, nearest, bilinear
                and bicubic interpolation (Resize), flip, roll between
                repeated convolution blocks
recurrent       TorchScript and ONNX: nn.LSTM (2 layers, bidirectional,
                batch_first), nn.GRU (time-major) and nn.RNN (relu, no
                bias) reading each other's outputs and final states
layers          TorchScript (and ONNX without Dropout2d): convolutions with
                reflect / replicate / circular padding, PReLU, F.unfold,
                one_hot, remainder / fmod, Dropout2d, indexing with several
                index tensors, linspace, padding="same" with an even
                kernel, a pooling window larger than its input (ceil_mode)
moe             TorchScript and ONNX: a dense mixture of experts with top-2
                gating (topk, scatter of the gate weights), sort / argsort
                with gather, scatter_add
math            TorchScript (math_onnx: what torch exports to ONNX): about
                fifty elementwise and small functions (trigonometric,
                rounding, exp2 / log2 / log1p / expm1, hypot, lerp,
                addcmul, logaddexp, xlogy, nan_to_num, shrinks, logit,
                sinc, atan2, argmax / max indices, median, aminmax,
                var_mean, cdist, baddbmm / addmm, eye, einsum with "...",
                movedim, tensor_split, logcumsumexp, cumprod, diff,
                bucketize)
moe_lm          TorchScript and ONNX: a token-level mixture of experts
                language model whose loss adds a cross-entropy over the
                tokens not ignored (labels that are multiples of 7 become
                -100: unevenly many per micro-batch), the router z-loss (a
                mean over the tokens) and a mean of the embeddings (on the
                first stage)
moe_balance     moe_lm plus Switch Transformer's load-balancing loss (a
                product of two means over the tokens: no micro-batching
                adds up to it; varuna-run warns)
mixed_reductions  a cross-entropy mean plus a KL divergence summed over the
                examples
weighted_ce     TorchScript and ONNX: nn.CrossEntropyLoss with class weights
                (a buffer) over the tokens not ignored: PyTorch's weighted
                mean, sum(w[y] * loss) / sum(w[y]), a ratio whose divisor
                comes from the labels and the weights
stop_gradient   TorchScript: .detach() where it changes the gradients -- a
                straight-through rounding (x + (round(x) - x).detach()), a
                distillation target from a second head, Gaussian NLL against
                a detached target (ONNX: torch's exporter drops detach;
                varuna.export warns)
soft_targets    TorchScript (soft_targets_onnx: ONNX): cross-entropy against
                class probabilities (mixup / distillation labels from the
                data), with class weights and label smoothing (TorchScript),
                next to one against class indices
margins         TorchScript: soft_margin, margin_ranking, hinge_embedding,
                cosine_embedding and poisson_nll losses (log input, and
                full with Stirling's term), softplus with beta / threshold
lstm_proj       TorchScript: nn.LSTM with proj_size (2 layers,
                bidirectional, batch_first), its last projected state read
class_margins   TorchScript: multi_margin_loss (p = 1, and p = 2 with a
                margin and class weights) and multilabel_margin_loss over
                target lists of uneven length (ending at the first -1,
                repeats counted twice), mean and sum
bags            TorchScript: nn.EmbeddingBag on a 2-D input (bags of one
                size) in mean, sum (per_sample_weights) and max modes, each
                with a padding_idx, some bags all padding (zeros, as torch)
folds           TorchScript: F.fold (nn.Fold) after F.unfold with a per-window
                linear: overlapping windows (stride below the kernel) and
                padding add back up; dilated windows
sampler         TorchScript: a spatial transformer -- F.affine_grid from a
                localization layer, F.grid_sample bilinear (zeros, and
                border padding on a grid that is a parameter) and nearest
                (border, align_corners), gradients reaching the grids
packed          TorchScript: pack_padded_sequence (lengths from the data,
                sorted longest first) into a 2-layer bidirectional nn.LSTM,
                pad_packed_sequence(total_length=T), packed again time-major
                into an nn.GRU; the last states and a mean over each row's
                own length feed the head
weighted_losses weighted_ce plus a weighted nll_loss over [B, C, S] log
                probabilities, a weighted cross-entropy with label smoothing
                over rows of which some are ignored whole, and a weighted
                sum: three weighted means added
distances       TorchScript: metric learning -- triplet_margin_loss (default,
                and p = 1 with swap and a margin), pairwise_distance as a
                feature, GaussianNLLLoss, KL divergence with log targets,
                multilabel_soft_margin_loss; torch.mv and torch.dot of
                parameters
uneven_pools    TorchScript: adaptive average and max pooling to sizes that
                do not divide the input (5 x 7 to 3 x 3 and 2 x 2: windows
                of uneven sizes, as torch)
shuffled        TorchScript: nn.ChannelShuffle (ShuffleNet), softmin,
                Softmax2d, tanhshrink, threshold, hardtanh, logsigmoid
rotary          TorchScript: a LLaMA-style decoder with rotary embeddings
                as Meta's reference code writes them -- a complex64 buffer
                made by torch.polar, view_as_complex, complex products,
                view_as_real -- RMSNorm, SwiGLU, causal SDPA
complex_ops     TorchScript: complex arithmetic -- polar of learned
                frequencies, complex(), conj, abs, exp, real / imag, a
                complex plus a real tensor, division by a number, division
                of a complex and of a real tensor by a complex one,
                reciprocal, sums,
                transpose and concatenation of complex tensors
gfnet           TorchScript: GFNet's global filter -- rfft2 over the patch
                grid (norm="ortho"), times a learned filter (a real
                parameter viewed as complex), irfft2 back
ffttour         TorchScript: fft / ifft (norm="forward") / rfft / irfft (n
                given; odd and even lengths) / fftn, abs, a complex matmul
                by a learned complex matrix, a complex einsum with conj, a
                long convolution through rfft / irfft zero-padded by n, n
                and s that trim
fno             TorchScript: a Fourier neural operator as its reference code
                writes it -- rfft2, complex64 parameters, a complex einsum
                over the lowest modes written in place into slices of a
                complex zeros tensor, irfft2 back
fnet            TorchScript: Hugging Face's FNetForSequenceClassification
                (torch.fft.fftn over the sequence and hidden dimensions,
                .real)
random_moments  TorchScript: random numbers drawn inside forward -- randn,
                rand_like, new_empty().normal_, empty().uniform_,
                exponential_, Gumbel noise, bernoulli_ and bernoulli,
                randint (two forms), randint_like, normal(tensor, std), the
                first draws of two blocks multiplied (independent stages) --
                each term a sample mean times its own weight (1 at the
                start; random_moments.py reads the means off the weights)
diffusion       TorchScript: DDPM's training objective -- torch.randint
                timesteps, torch.randn_like noise, the schedule's buffers
                indexed by the timesteps, a sinusoidal embedding, an MLP
                predicting the noise, MSE
gcn             TorchScript: graph convolution as plain torch writes it --
                messages gathered at the edges' sources, summed at their
                targets with index_add_ over a fixed edge list (a buffer)
pooled_graph    TorchScript: message passing pooled as PyG's scatter does
                it -- scatter_reduce with mean, amax, amin and sum (with and
                without include_self) over a fixed edge list
barlow          TorchScript: Barlow Twins' loss -- the cross-correlation of
                the batch's embeddings, torch.diagonal and the
                off_diagonal trick (flatten, view, slice); a function of the
                whole batch (exact with one micro-batch)
dlrm            TorchScript: DLRM -- bottom MLP, one EmbeddingBag per
                sparse feature, pairwise dot interactions picked by
                torch.tril_indices(offset=-1), top MLP, BCE with logits
lookups         TorchScript: torch.searchsorted into a sorted buffer (both
                sides), take_along_dim by an argsort, outer / addr,
                tensordot (an int and lists of dims)
index_writes    TorchScript: x[mask] = 0, x[:, idx] = 1 (index_fill_, an index
                counting from the end),
                x[:, :, idx] = tensor (index_put_), index_put with
                accumulate, index_copy, diag, diag_embed, trace,
                diagonal with an offset
wavenet         ONNX and TorchScript: WaveNet's gated dilated causal
                convolutions (tanh x sigmoid, left padding, residual and
                skip sums); the last residual projection's output is never
                used, so torch's ONNX exporter drops its parameters
                (varuna.export adds them back: kept unchanged, as torch's
                SGD skips a parameter without a gradient)
rwkv            TorchScript: RWKV-style time mixing -- the token shift as
                its code writes it, F.pad(x, (0, 0, 1, -1)) (a negative
                pad crops), and the WKV recurrence with exponential decay
                unrolled over time
s4d             TorchScript: an S4D layer -- a diagonal complex state
                matrix from real parameters, the discretized kernel
                C (exp(dt A) - 1) / A (complex division) through a
                Vandermonde einsum of exp, .real, convolution by rfft / irfft
glow            TorchScript: Glow's steps -- an invertible 1x1 convolution
                whose weight starts as a (column-major) Q of torch.linalg.qr,
                H W slogdet(W) in the log-determinant, affine coupling
gp              TorchScript: a Gaussian-process marginal likelihood --
                linalg.cholesky of an RBF kernel with learned length scale
                and noise, cholesky_solve, linalg.solve, inverse, det, logdet
mahalanobis     TorchScript: a per-example covariance from a network: a
                batched cholesky, solve and slogdet
centernet       TorchScript and ONNX: CenterNet's focal loss over a heatmap,
                divided by the number of positives clamped at 1 (images
                without objects: micro-batches whose count is 0 while the
                step's is not)
special         TorchScript: likelihoods from torch.distributions whose
                log_prob uses lgamma / digamma (Gamma, Beta, StudentT,
                NegativeBinomial, Dirichlet's entropy), erfc, erfinv,
                logaddexp2, copysign, heaviside, isnan / isinf /
                isfinite / logical_xor masks
stochastic      TorchScript: a VAE's reparameterization (randn_like), timm's
                drop_path (x.new_empty(shape).bernoulli_(keep).div_(keep))
                around residual blocks, and a Gumbel-softmax (hard=True)
                codebook lookup
quantiles       TorchScript: order statistics of features -- quantile with a
                number and a tensor of levels, every interpolation (f32
                positions: 0.3 of 16 elements is "nearest" element 5, as
                torch), of all elements too; kthvalue values and indices
weight_stats    TorchScript: regularizers on weight matrices (corrcoef,
                cov trace, cov of a 1-D parameter, correction=0), a
                Kronecker-factored layer (kron), a block-diagonal one
                (block_diag of two parameters), ldexp by a buffer
running         TorchScript: cummax / cummin along time (values and
                indices), trapezoid by sample points (a buffer) and trapz
                by dx
nan_aware       TorchScript: features set to NaN where the input says so,
                nanmean / nansum over them and over parameters,
                count_nonzero of a mask as a feature
rotations       TorchScript: rotation-averaged convolution (rot90 by k = 0
                to 3 and back by -k, dims in either order)
stft_loss       TorchScript: a vocoder-style generator trained with a
                multi-resolution STFT loss (torch.stft with a Hann window,
                spectral convergence by torch.linalg.norm over two
                dimensions, log magnitudes)
mel_front       TorchScript: a log-mel front end inside the model (torch.stft
                with center padding, power from .real / .imag, a filterbank
                matmul) before a small CNN classifier
masked_tokens   TorchScript: losses over the positions a boolean mask
                selects, written with x[mask]: cross-entropy (class weights,
                label smoothing) of logits[mask] and of a flattened
                view(-1, C)[active], plus a regression head's mean squared
                and smooth-L1 error over the same positions
masked_compute  TorchScript: layers run on the selected tokens only
                (out[mask] = proj(norm(h[mask]))), masked_scatter back,
                softmax / log_softmax / logsumexp / cumsum / unsqueeze /
                slicing of selected rows, masked_select, a mean over the
                rows and a sum per row, a BCE-with-logits over them
masked_mixed    TorchScript: an ELECTRA-style loss -- a generator's
                cross-entropy over the masked tokens plus a discriminator's
                BCE over the tokens the attention mask keeps plus a
                regression mean over a third mask: means counting different
                selections, added
batch_stats     TorchScript: statistics over the batch by hand that flow
                back into the examples (features centred by h.mean(0),
                scaled by a mean over an x[mask] selection)
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

S, D, C = 8, 16, 10


class Block(nn.Module):
    def __init__(self, act, rms):
        super().__init__()
        self.norm = nn.RMSNorm(D) if rms else nn.LayerNorm(D)
        self.up = nn.Linear(D, 2 * D)
        self.down = nn.Linear(D, D)
        self.act = act

    def forward(self, h):
        u = F.glu(self.up(self.norm(h)), dim=-1)
        return h + self.down(self.act(u))


class Functions(nn.Module):
    def __init__(self, onnx=False):
        super().__init__()
        self.onnx = onnx
        self.embed = nn.Linear(4, D)
        acts = [F.mish, F.hardswish, lambda t: F.elu(t, 0.7), F.selu,
                lambda t: F.celu(t, 1.3), lambda t: F.leaky_relu(t, 0.05), F.logsigmoid]
        self.blocks = nn.ModuleList(Block(a, not onnx) for a in acts)
        self.mix = nn.Parameter(torch.randn(D, D) / 4)
        self.conv = nn.Conv1d(D, D, 3, padding=1)
        self.gn = nn.GroupNorm(4, D)
        self.inorm = nn.InstanceNorm1d(D, affine=True)
        self.protos = nn.Parameter(torch.randn(C, D))
        self.head = nn.Linear(3 * D + 2, C)
        if not onnx:
            self.bil = nn.Bilinear(D, D, C)

    def forward(self, x, targets, labels):
        h = self.embed(x)
        for b in self.blocks:
            h = b(h)
        q = torch.einsum("bsd,de->bse", h, self.mix)
        att = torch.einsum("bqd,bkd->bqk", q, h).softmax(-1)
        h = h + torch.einsum("bqk,bkd->bqd", att, h)
        c = self.inorm(self.gn(self.conv(h.transpose(1, 2))))
        pooled = F.adaptive_max_pool1d(c, 1).squeeze(-1)
        stats = torch.stack([torch.logsumexp(h, (1, 2)), h.std(dim=(1, 2))], -1)
        feats = torch.cat([pooled, h.mean(1) / h.var(1, keepdim=False).add(1).sqrt(),
                           h.norm(dim=1) / 10, stats], -1)
        logits = self.head(feats) + F.cosine_similarity(
            h.mean(1).unsqueeze(1), self.protos.unsqueeze(0), dim=-1)
        if not self.onnx:
            logits = logits + self.bil(h.mean(1), h.max(1).values) / 4
            # renorm per example, a cross product, entr, rad2deg / deg2rad,
            # sgn (TorchScript; torch's ONNX exporter has no renorm / entr).
            m = h.mean(1)
            r = torch.renorm(m, 2, 0, 1.0) + torch.renorm(m, 3, 0, 0.5)
            cr = torch.linalg.cross(r[:, :3], r[:, 3:6])
            logits = logits + (torch.special.entr(torch.sigmoid(r)).sum(-1, keepdim=True)
                               + torch.deg2rad(torch.rad2deg(cr)).sum(-1, keepdim=True)
                               * torch.sgn(m[:, :1])) / 4
            # asinh / atanh, fmax, fliplr, hstack, a matrix norm, inner with
            # a vector, isclose and any as masks.
            g = torch.hstack([torch.asinh(m[:, :3]), torch.atanh(torch.tanh(m[:, 3:6]) * 0.9)])
            g = torch.fmax(g, torch.fliplr(g) * 0.5)
            mat = g.view(-1, 2, 3)
            near = torch.isclose(g, g.round(), atol=0.2).any(1, keepdim=True)
            logits = logits + (torch.linalg.matrix_norm(mat)[:, None]
                               + torch.inner(g, torch.arange(6.0))[:, None] / 10
                               ) * torch.where(near, 0.5, 1.0) / 4
        probs = torch.sigmoid(targets)
        loss = (F.cross_entropy(logits, labels) + F.mse_loss(logits, targets)
                + F.binary_cross_entropy_with_logits(logits, probs)
                + F.kl_div(F.log_softmax(logits, -1), F.softmax(targets, -1),
                           reduction="mean")
                # divided by the batch size: means over the examples too
                + F.kl_div(F.log_softmax(logits, -1), F.softmax(targets * 2, -1),
                           reduction="batchmean")
                + (logits - targets).abs().sum() / (2 * x.shape[0]) / C)
        if not self.onnx:
            loss = loss + (F.binary_cross_entropy(torch.sigmoid(logits), probs) + F.l1_loss(logits, targets) + F.smooth_l1_loss(logits, targets, beta=0.5)
                           + F.huber_loss(logits, targets, delta=2.0))
        return loss


def _example():
    return (torch.randn(2, S, 4), torch.randn(2, C), torch.randint(0, C, (2,)))


def functions():
    return Functions(), _example()


def functions_onnx():
    return Functions(onnx=True), _example()


class MixedReductions(nn.Module):
    """A mean over the examples plus a sum over them: the cross-entropy
    divides by the step's labels, so the micro-batches add up."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, D), nn.GELU(), nn.Linear(D, C))

    def forward(self, x, targets, labels):
        logits = self.body(x.mean(1))
        return F.cross_entropy(logits, labels) + F.kl_div(
            F.log_softmax(logits, -1), F.softmax(targets, -1), reduction="sum") / 64


def mixed_reductions():
    return MixedReductions(), _example()


class ConvBlock(nn.Module):
    def __init__(self, shift):
        super().__init__()
        self.conv = nn.Conv2d(4, 16, 3, padding=1)
        self.back = nn.Conv2d(4, 4, 3, stride=2, padding=1)
        self.tconv = nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1,
                                        groups=2)
        self.shift = shift

    def forward(self, h):  # [B, 4, 8, 8]
        up = F.pixel_shuffle(self.conv(h), 2)  # [B, 4, 16, 16]
        up = torch.roll(torch.flip(up, [3]), self.shift, 2) + self.tconv(h)
        down = self.back(F.gelu(up))  # [B, 4, 8, 8]
        pooled = F.avg_pool2d(h, 2)  # [B, 4, 4, 4]
        smooth = (F.interpolate(pooled, scale_factor=2, mode="bilinear")
                  + F.interpolate(pooled, size=(8, 8), mode="bicubic", align_corners=True)
                  + F.interpolate(h, scale_factor=1.5, mode="bilinear", align_corners=True)[..., :8, :8])
        return h + down + F.interpolate(pooled, scale_factor=2, mode="nearest") + smooth / 3


class Shapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.blocks = nn.ModuleList(ConvBlock(s) for s in (1, -2, 3, 2))
        self.head = nn.Linear(16 * 4 * 4, C)

    def forward(self, x, labels):
        h = self.stem(x)
        for b in self.blocks:
            h = b(h)
        return F.cross_entropy(self.head(F.pixel_unshuffle(h, 2).flatten(1)), labels)


def shapes():
    return Shapes(), (torch.randn(2, 3, 8, 8), torch.randint(0, C, (2,)))


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, D)
        self.lstm = nn.LSTM(D, 6, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(12, D)
        self.rnn = nn.RNN(D, 5, nonlinearity="relu", batch_first=True, bias=False)
        self.head = nn.Linear(5 + D + 6, C)

    def forward(self, x, labels):  # x [B, S, 4]
        out, (h, c) = self.lstm(torch.tanh(self.embed(x)))
        seq, last = self.gru(out.transpose(0, 1))
        tail, _ = self.rnn(seq.transpose(0, 1))
        return F.cross_entropy(self.head(torch.cat([tail[:, -1], last[0], c[-1]], -1)), labels)


def recurrent():
    return Recurrent(), (torch.randn(2, S, 4), torch.randint(0, C, (2,)))


class Layers(nn.Module):
    def __init__(self, onnx=False):
        super().__init__()
        self.onnx = onnx
        self.c1 = nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect")
        self.c2 = nn.Conv2d(4, 4, 3, padding=1, padding_mode="replicate")
        self.c3 = nn.Conv2d(4, 4, 3, padding=2, dilation=2, padding_mode="circular")
        self.act = nn.PReLU(4)
        self.drop = nn.Dropout2d(0.0)
        self.same = nn.Conv2d(4, 4, 4, padding="same")  # pads 1 before, 2 after
        self.head = nn.Linear(16 * 16 + 5 + 3 + 12 + 32 + 8, C)

    def forward(self, x, labels):  # x [B, 3, 8, 8]
        h = self.act(self.c1(x))
        if not self.onnx:
            h = self.drop(h)
        h = self.c3(F.prelu(self.c2(h), torch.tensor([0.2])) + torch.fmod(h, 0.5))
        patches = F.unfold(h, 2, stride=2)  # [B, 16, 16]
        ids = (h.detach().mean((1, 2, 3)) * 40).long().remainder(5)
        # Advanced indexing with several index tensors (HF's masks index
        # padding_mask[batch_idx, kv_idx]): leading, adjacent after axis 0
        # (negative indices: not for ONNX, whose exporter gets them wrong --
        # onnxruntime agrees with us), separated by a slice (per-example
        # indices: the same for any micro-batch).
        b = torch.arange(x.shape[0])
        picked = h[b[:, None], torch.tensor([3, 0, 2])]  # [B, 3, 8, 8]
        last = 7 if self.onnx else -1
        diag = h[:, :, torch.tensor([0, 2, last]), torch.tensor([1, 5, 4])]  # [B, 4, 3]
        sep = h[b, :, ids]  # [B, 4, 8]
        feats = torch.cat([patches.flatten(1), F.one_hot(ids, 5).float(),
                           picked.mean((2, 3)) * torch.linspace(0.5, 1.5, 3),
                           diag.flatten(1), sep.flatten(1),
                           self.same(h).mean((2, 3)),
                           F.avg_pool2d(h, 16, ceil_mode=True).flatten(1)], 1)  # window > input
        return F.cross_entropy(self.head(feats), labels)


def layers():
    return Layers(), (torch.randn(2, 3, 8, 8), torch.randint(0, C, (2,)))


def layers_onnx():
    return Layers(onnx=True), (torch.randn(2, 3, 8, 8), torch.randint(0, C, (2,)))


class MoE(nn.Module):
    def __init__(self, experts=4):
        super().__init__()
        self.experts = experts
        self.embed = nn.Linear(4, D)
        self.gate = nn.Linear(D, experts)
        self.up = nn.Linear(D, experts * D)
        self.head = nn.Linear(2 * D + 3, C)

    def forward(self, x, labels):  # x [B, S, 4]
        h = self.embed(x)
        logits = self.gate(h)  # [B, S, E]
        top, which = logits.topk(2, -1)
        weights = torch.zeros_like(logits).scatter(-1, which, top.softmax(-1))
        out = (self.up(h).view(x.shape[0], S, self.experts, D) * weights.unsqueeze(-1)).sum(2)
        ranked, order = out.mean(-1).sort(-1, descending=True)  # [B, S]
        reordered = torch.gather(out, 1, order.unsqueeze(-1).expand(-1, -1, D))
        hist = torch.zeros(x.shape[0], 3).scatter_add(1, order[:, :3] % 3, ranked[:, :3])
        first = torch.argsort(h[..., 0], -1)[:, :1]  # [B, 1]
        picked = torch.gather(h, 1, first.unsqueeze(-1).expand(-1, -1, D)).squeeze(1)
        feats = torch.cat([reordered[:, 0] + picked, out.mean(1), hist], -1)
        return F.cross_entropy(self.head(feats), labels)


def moe():
    return MoE(), (torch.randn(2, S, 4), torch.randint(0, C, (2,)))


VOCAB = 100  # hf_oracle.py's input_ids (hf_models.V); labels = input_ids


class MoELM(nn.Module):
    def __init__(self, experts=4, balance=False):
        super().__init__()
        self.experts, self.balance = experts, balance
        self.embed = nn.Embedding(VOCAB, D)
        self.gate = nn.Linear(D, experts)
        self.up = nn.Linear(D, experts * D)
        self.mix = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.Linear(D, D))
        self.head = nn.Linear(D, VOCAB)

    def forward(self, input_ids, labels):  # [B, S] each
        h = self.embed(input_ids)
        aux = h.pow(2).mean()
        router = self.gate(h)  # [B, S, E]
        z_loss = torch.logsumexp(router, -1).pow(2).mean()
        out = (self.up(h).view(input_ids.shape[0], S, self.experts, D)
               * router.softmax(-1).unsqueeze(-1)).sum(2)
        logits = self.head(h + self.mix(out))
        targets = labels.masked_fill(labels % 7 == 0, -100)
        ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss = ce + 0.1 * z_loss + 0.5 * aux
        if self.balance:  # E * sum_e (tokens routed to e) * (mean gate prob of e)
            probs = router.softmax(-1)
            routed = F.one_hot(router.argmax(-1), self.experts).float()
            loss = loss + 1e-2 * self.experts * (routed.mean((0, 1)) * probs.mean((0, 1))).sum()
        return loss


def moe_lm():
    ids = torch.randint(0, VOCAB, (2, S))
    return MoELM(), (ids, ids.clone())


def moe_balance():
    ids = torch.randint(0, VOCAB, (2, S))
    return MoELM(balance=True), (ids, ids.clone())


class StopGradient(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(4 * S, D), nn.Tanh())
        self.student = nn.Linear(D, C)
        self.teacher = nn.Linear(D, C)

    def forward(self, x, labels):
        h = self.enc(x.flatten(1))
        q = h + (torch.round(h * 4) / 4 - h).detach()  # straight-through
        z, t = self.student(q), self.teacher(h)
        distill = F.kl_div(F.log_softmax(z, -1), F.softmax(t.detach(), -1),
                           reduction="batchmean")
        return (F.cross_entropy(t, labels) + distill
                + F.gaussian_nll_loss(z[:, :5], z[:, 5:].detach(), torch.ones_like(z[:, :5])))


def stop_gradient():
    return StopGradient(), _example()[::2]


class SoftTargets(nn.Module):
    def __init__(self, onnx=False):
        super().__init__()
        self.onnx = onnx
        self.body = nn.Sequential(nn.Linear(4 * S, D), nn.Tanh(), nn.Linear(D, C))
        self.register_buffer("w", torch.rand(C) + 0.5)

    def forward(self, x, targets, labels):
        z = self.body(x.flatten(1))
        probs = F.softmax(targets * 2, -1)
        loss = F.cross_entropy(z, probs) + F.cross_entropy(z, labels)
        if not self.onnx:
            loss = loss + F.cross_entropy(z, probs, weight=self.w, label_smoothing=0.1,
                                          reduction="sum") / 8
        return loss


def soft_targets():
    return SoftTargets(), _example()


def soft_targets_onnx():
    return SoftTargets(onnx=True), _example()


class Margins(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4 * S, D), nn.Tanh(), nn.Linear(D, C))

    def forward(self, x, targets, labels):
        z = self.body(x.flatten(1))
        a, b = z[:, :5], z[:, 5:]
        y = ((labels % 2) * 2 - 1).float()  # +-1 per example
        ys = y.unsqueeze(1).expand_as(a)
        rate = F.softplus(targets[:, :5], beta=2.0, threshold=1.0)  # > 0
        return (F.soft_margin_loss(a, ys)
                + F.margin_ranking_loss(a[:, 0], b[:, 0], y, margin=0.1)
                + F.hinge_embedding_loss(a, ys, margin=0.5)
                + F.cosine_embedding_loss(a, b, y, margin=0.2)
                + F.poisson_nll_loss(b, rate)
                + F.poisson_nll_loss(F.softplus(a, beta=0.5) + 0.1, rate * 3, log_input=False,
                                     full=True, reduction="sum") / 8)


def margins():
    return Margins(), _example()


class LstmProj(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, D, num_layers=2, proj_size=6, batch_first=True,
                            bidirectional=True)
        self.head = nn.Linear(12 + 6, C)

    def forward(self, x, labels):
        y, (h, c) = self.lstm(x)
        return F.cross_entropy(self.head(torch.cat([y[:, -1], h[-1]], -1)), labels)


def lstm_proj():
    return LstmProj(), _example()[::2]


class ClassMargins(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4 * S, D), nn.Tanh(), nn.Linear(D, C))
        self.register_buffer("w", torch.rand(C) + 0.5)

    def forward(self, x, labels):  # labels [B, C] in [0, C)
        z = self.body(x.flatten(1))
        lists = labels.masked_fill(labels >= 7, -1)  # each row's list ends at its first -1
        return (F.multi_margin_loss(z, labels[:, 0])
                + F.multi_margin_loss(z, labels[:, 1], p=2, margin=0.5, weight=self.w)
                + F.multilabel_margin_loss(z, lists)
                + F.multilabel_margin_loss(2 * z, lists, reduction="sum") / 8)


def class_margins():
    return ClassMargins(), (torch.randn(2, S, 4), torch.randint(0, C, (2, C)))


class Bags(nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = nn.EmbeddingBag(VOCAB, D, mode="mean", padding_idx=2)
        self.sum = nn.EmbeddingBag(VOCAB, D, mode="sum", padding_idx=3)
        self.max = nn.EmbeddingBag(VOCAB, D, mode="max", padding_idx=2)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, input_ids, labels):  # [B, S] each
        # every bag whose label is a multiple of 3 is all padding
        padded = input_ids.masked_fill(labels[:, :1] % 3 == 0, 2)
        w = torch.sigmoid(input_ids.float() / 50)
        h = (self.mean(padded) + self.sum(input_ids % 9, per_sample_weights=w)
             + self.max(padded))
        return F.cross_entropy(self.head(torch.tanh(h)), labels[:, 1])


def bags():
    ids = torch.randint(0, VOCAB, (2, S))
    return Bags(), (ids, ids.clone())


class Folds(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = nn.Linear(3 * 4, 3 * 4)
        self.head = nn.Linear(3 * 7 * 6, C)

    def forward(self, x, labels):  # x [B, 3, 7, 6]
        cols = F.unfold(x, (2, 2), padding=1, stride=(2, 1))  # [B, 12, L]
        cols = self.mix(cols.transpose(1, 2)).transpose(1, 2)
        y = F.fold(cols, (7, 6), (2, 2), padding=1, stride=(2, 1))
        z = F.fold(F.unfold(torch.tanh(y), 3, dilation=2), (7, 6), 3, dilation=2)
        return F.cross_entropy(self.head((y + z).flatten(1)), labels)


def folds():
    return Folds(), (torch.randn(2, 3, 7, 6), torch.randint(0, C, (2,)))


class Sampler(nn.Module):
    def __init__(self):
        super().__init__()
        self.loc = nn.Linear(3 * 7 * 8, 6)
        with torch.no_grad():
            self.loc.weight.mul_(0.1)
            self.loc.bias.copy_(torch.tensor([1.1, 0.2, 0.1, -0.1, 0.9, 0.05]))
        self.offsets = nn.Parameter(torch.rand(1, 4, 5, 2) * 2.4 - 1.2)
        self.head = nn.Linear(3 * 5 * 6 + 3 * 7 * 8 + 3 * 4 * 5, C)

    def forward(self, x, labels):  # x [B, 3, 7, 8]
        theta = self.loc(x.flatten(1)).view(-1, 2, 3)
        g = F.affine_grid(theta, (x.shape[0], 3, 5, 6), align_corners=False)
        a = F.grid_sample(x, g, align_corners=False)
        g2 = F.affine_grid(theta * 1.3, list(x.shape), align_corners=True)
        b = F.grid_sample(torch.tanh(x), g2, mode="nearest", padding_mode="border", align_corners=True)
        c = F.grid_sample(x, torch.tanh(self.offsets).expand(x.shape[0], -1, -1, -1) * 1.2,
                          padding_mode="border")
        return F.cross_entropy(self.head(torch.cat([a.flatten(1), b.flatten(1), c.flatten(1)], 1)), labels)


def sampler():
    return Sampler(), (torch.randn(2, 3, 7, 8), torch.randint(0, C, (2,)))


class Packed(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, D, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(2 * D, D)
        self.head = nn.Linear(4 * D, C)

    def forward(self, x, lengths, labels):  # x [B, S, 4], lengths [B] longest first
        p = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
        out, (h, c) = self.lstm(p)
        y, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        _, g = self.gru(nn.utils.rnn.pack_padded_sequence(y.transpose(0, 1), lengths))
        feats = torch.cat([y.sum(1) / lengths.unsqueeze(1), h[-1], g[0]], -1)
        return F.cross_entropy(self.head(feats), labels)


def packed():
    return Packed(), (torch.randn(2, S, 4), torch.tensor([S, 5]), torch.randint(0, C, (2,)))


class PackedUnsorted(nn.Module):
    """pack_padded_sequence(enforce_sorted=False): lengths in any order
    (named seq_lengths, so hf_oracle does not sort them), learned initial
    states (torch permutes them by the sort), and pad_packed_sequence's
    lengths (in the examples' order again) used for the mean."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, D, batch_first=True, bidirectional=True)
        self.h0 = nn.Parameter(torch.randn(2, 1, D) * 0.1)
        self.gru = nn.GRU(2 * D, D, batch_first=True)
        self.head = nn.Linear(4 * D, C)

    def forward(self, x, seq_lengths, labels):
        n = x.shape[0]
        h0 = self.h0.expand(-1, n, -1).contiguous()
        p = nn.utils.rnn.pack_padded_sequence(x, seq_lengths, batch_first=True,
                                              enforce_sorted=False)
        out, (h, _) = self.lstm(p, (h0, torch.zeros_like(h0)))
        y, lengths = nn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                      total_length=x.shape[1])
        q = nn.utils.rnn.pack_padded_sequence(y, seq_lengths, batch_first=True,
                                              enforce_sorted=False)
        _, g = self.gru(q)
        feats = torch.cat([y.sum(1) / lengths.unsqueeze(1).to(y.dtype), h[-1], g[0]], -1)
        return F.cross_entropy(self.head(feats), labels)


def packed_unsorted():
    return PackedUnsorted(), (torch.randn(2, S, 4), torch.tensor([3, S]),
                              torch.randint(0, C, (2,)))


class WeightedCE(nn.Module):
    def __init__(self, more=False):
        super().__init__()
        self.more = more
        self.embed = nn.Embedding(VOCAB, D)
        self.body = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.Linear(D, VOCAB))
        self.crit = nn.CrossEntropyLoss(weight=torch.rand(VOCAB) + 0.1)
        self.register_buffer("w2", torch.rand(VOCAB) * 2)

    def forward(self, input_ids, labels):
        logits = self.body(self.embed(input_ids))  # [B, S, V]
        targets = labels.masked_fill(labels % 5 == 0, -100)
        loss = self.crit(logits.flatten(0, 1), targets.flatten())
        if self.more:
            # whole rows ignored when their first label is a multiple of 3:
            # some micro-batches of 2 count no label at all
            rows = labels.masked_fill(labels[:, :1] % 3 == 0, -100)
            loss = (loss + F.nll_loss(F.log_softmax(logits, -1).transpose(1, 2), targets,
                                      weight=self.w2)
                    + F.cross_entropy(logits.transpose(1, 2), rows, weight=self.w2,
                                      label_smoothing=0.1)
                    + 1e-3 * F.cross_entropy(logits.flatten(0, 1), labels.flatten(),
                                             weight=self.w2, reduction="sum"))
        return loss


def weighted_ce():
    ids = torch.randint(0, VOCAB, (2, S))
    return WeightedCE(), (ids, ids.clone())


def weighted_losses():
    ids = torch.randint(0, VOCAB, (2, S))
    return WeightedCE(more=True), (ids, ids.clone())


class Math(nn.Module):
    def __init__(self, onnx=False):
        super().__init__()
        self.onnx = onnx
        self.embed = nn.Linear(4, D)
        self.mix = nn.Parameter(torch.randn(D, D) / 4)
        self.head = nn.Linear(D + 2 + S, C)

    def forward(self, x, labels):  # x [B, S, 4]
        h = torch.tanh(self.embed(x))  # in (-1, 1)
        a, b = h, h.roll(1, 2)
        t = (torch.atan(a) + torch.asin(a * 0.9) + torch.acos(b * 0.9) + torch.tan(a * 0.5)
             + torch.sign(a) * a + torch.round(a * 3) / 3 + torch.log1p(a.abs())
             + torch.atan2(a, b) * 0.1 + F.softshrink(a, 0.2) + F.hardshrink(b, 0.3)
             + torch.logit(torch.sigmoid(a), 1e-6) * 0.1 + torch.nan_to_num(a / (b.abs() + 0.5))
             + torch.log2(a.abs() + 1) + torch.log10(b.abs() + 1) + torch.square(a)
             + torch.addcmul(a, a, b, value=0.5) + torch.lerp(a, b, 0.3))
        if not self.onnx:
            t = t + (torch.sinh(a) + torch.cosh(b) + torch.expm1(a) + torch.exp2(b) + torch.trunc(a * 3)
                     + torch.frac(a * 3) + torch.hypot(a, b) + torch.addcdiv(a, a, b.abs() + 1)
                     + torch.logaddexp(a, b) + torch.xlogy(a.abs(), b.abs() + 1) + torch.sinc(a)
                     + F.threshold(a, 0.1, 0.5) + torch.float_power(a.abs() + 1, 2).float() * 0.1
                     + torch.logcumsumexp(a, 1) * 0.1
                     + torch.cumprod(F.relu(a) + 0.5, 1) * 0.1 + torch.cumprod(F.relu(b), 1)
                     + torch.cat([torch.diff(a, dim=1), a[:, :1]], 1))
        t = torch.einsum("...ij,jk->...ik", t, self.mix) + torch.movedim(t.view(-1, S, 2, D // 2), 2, 3).reshape(t.shape)
        pieces = torch.tensor_split(t, 3, 2)  # ONNX: SplitToSequence + SequenceAt
        t = torch.cat(pieces[::-1], 2)
        t = torch.baddbmm(t, t, torch.eye(D).expand(x.shape[0], D, D), beta=0.5, alpha=0.5)
        t = torch.addmm(self.head.bias.new_zeros(D), t.reshape(-1, D), self.mix).view_as(t) + t
        spread, centre = torch.var_mean(t, 1)
        lo, hi = torch.aminmax(t, dim=1)
        picked = torch.gather(t, 1, t.argmax(1, keepdim=True)).squeeze(1)
        idx = t.max(-1)[1].float() / D  # [B, S]
        # cdist at zero distance: torch's gradient is 0, but its ONNX export
        # takes Sqrt of 0 (an infinite gradient), so no point meets itself.
        dist = torch.cdist(t, t[:, :2] + 0.5).mean(-1)  # [B, S]
        med = t.median(1).values if not self.onnx else t.amax(1)
        buckets = torch.bucketize(t[..., 0].detach(), torch.tensor([-0.5, 0.0, 0.5])).float()
        feats = torch.cat([spread + centre + hi - lo + picked + med,
                           dist.mean(1, keepdim=True), buckets.mean(1, keepdim=True), idx], -1)
        return F.cross_entropy(self.head(feats), labels)


def math():
    return Math(), (torch.randn(2, S, 4), torch.randint(0, C, (2,)))


def math_onnx():
    return Math(onnx=True), (torch.randn(2, S, 4), torch.randint(0, C, (2,)))


class CTC(nn.Module):
    """Speech-style CTC: a bidirectional GRU over frames, F.ctc_loss with
    padded targets [N, S] (repeated labels: the recursion's skip rule; -1
    past each target length),
    input and target lengths from the data, rows whose input is too short
    for their target (no path: zero_infinity), mean over target lengths."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 16, batch_first=True, bidirectional=True)
        self.out = nn.Linear(32, 4)

    def forward(self, x, targets, input_lengths, target_lengths):
        y, _ = self.rnn(x)
        lp = F.log_softmax(self.out(y), -1).transpose(0, 1)
        # padding past each target length: -1 (torch never reads it)
        targets = targets.masked_fill(torch.arange(4) >= target_lengths[:, None], -1)
        return F.ctc_loss(lp, targets, input_lengths, target_lengths, blank=0,
                          zero_infinity=True)


def ctc():
    # hf_oracle draws integer inputs within the example's range: targets
    # 1..3, input lengths 3..10, target lengths 1..4.
    return CTC(), (torch.randn(2, 10, 4), torch.tensor([[1, 1, 2, 3], [3, 2, 1, 1]]),
                   torch.tensor([3, 10]), torch.tensor([1, 4]))


class BceWeights(nn.Module):
    """Segmentation-style BCE with logits: pos_weight (a buffer) and an
    element weight, and binary_cross_entropy on probabilities with a
    weight."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.out = nn.Conv2d(4, 2, 1)
        self.register_buffer("pos_weight", torch.tensor([[[3.0]], [[0.5]]]))
        self.register_buffer("pixel_weight", torch.linspace(0.5, 1.5, 8))

    def forward(self, x, mask):
        logits = self.out(F.relu(self.conv(x)))
        target = (mask > 0).float()
        a = F.binary_cross_entropy_with_logits(logits, target, weight=self.pixel_weight,
                                               pos_weight=self.pos_weight)
        b = F.binary_cross_entropy(torch.sigmoid(logits[:, :1]), target[:, :1],
                                   weight=self.pixel_weight, reduction="sum")
        return a + 0.01 * b


def bce_weights():
    return BceWeights(), (torch.randn(2, 3, 8, 8), torch.randn(2, 2, 8, 8))


class WeightNormed(nn.Module):
    """A temporal conv net with weight normalisation: the
    parametrizations.weight_norm API (dim 0) and the older
    nn.utils.weight_norm with dim=None (one norm over the whole weight)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 8, 3, dilation=1))
        self.c2 = nn.utils.weight_norm(nn.Conv1d(8, 8, 3, dilation=2), dim=None)
        self.head = nn.utils.parametrizations.weight_norm(nn.Linear(8, C))

    def forward(self, x, labels):
        h = x.transpose(1, 2)
        h = F.leaky_relu(self.c1(F.pad(h, (2, 0))), 0.1)
        h = h + F.leaky_relu(self.c2(F.pad(h, (4, 0))), 0.1)
        return F.cross_entropy(self.head(h[:, :, -1]), labels)


def weight_normed():
    return WeightNormed(), (torch.randn(2, S, 4), torch.randint(0, C, (2,)))


class VAE(nn.Module):
    """A variational autoencoder's loss as usually written: the
    reconstruction sum plus -0.5 * the KL sum, over the batch size
    (the noise comes with the data: a sampled eps would be a different
    draw)."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 8))
        self.dec = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 12))

    def forward(self, x, eps):
        mu, logvar = self.enc(x).chunk(2, -1)
        z = mu + eps * torch.exp(0.5 * logvar)
        rec = F.binary_cross_entropy_with_logits(self.dec(z), torch.sigmoid(x), reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        return (rec + kld) / x.shape[0]


def vae():
    return VAE(), (torch.randn(2, 12), torch.randn(2, 4))


class Frames(nn.Module):
    """Audio-style framing: Tensor.unfold into overlapping windows, the
    window functions (periodic or not, hamming's alpha), torch.roll over the
    frames, and a Gaussian negative
    log-likelihood through torch.distributions.Normal."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, wave, target):
        window = (torch.hann_window(8) + torch.hamming_window(8, False, alpha=0.6)
                  + torch.blackman_window(8) + torch.bartlett_window(8, False)) / 4
        frames = wave.unfold(1, 8, 4) * window  # [B, 9, 8]
        h = torch.tanh(self.proj(frames))
        h = h + torch.roll(h, 1, 1)
        out = self.head(h.mean(1))
        dist = torch.distributions.Normal(out[:, 0], out[:, 1].exp())
        return -dist.log_prob(target).mean()


def frames():
    return Frames(), (torch.randn(2, 40), torch.randn(2))


def _rope(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    t = torch.arange(end, dtype=torch.float32)
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs))  # complex64


def _apply_rotary(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    fc = freqs_cis.view(*shape)
    return (torch.view_as_real(xq_ * fc).flatten(3).type_as(xq),
            torch.view_as_real(xk_ * fc).flatten(3).type_as(xk))


class RotaryBlock(nn.Module):
    # Grouped-query attention: the `heads` query heads share `kv_heads` key /
    # value heads, which SDPA repeats (enable_gqa, as Hugging Face's Llama
    # passes it).
    def __init__(self, d=16, heads=2, kv_heads=1):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        kv = d // heads * kv_heads
        self.wq, self.wo = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
        self.wk, self.wv = nn.Linear(d, kv, bias=False), nn.Linear(d, kv, bias=False)
        self.n1, self.n2 = nn.RMSNorm(d, eps=1e-6), nn.RMSNorm(d, eps=1e-6)
        self.w1, self.w3 = nn.Linear(d, 32, bias=False), nn.Linear(d, 32, bias=False)
        self.w2 = nn.Linear(32, d, bias=False)

    def forward(self, x, freqs_cis):
        B, T, d = x.shape
        a = self.n1(x)
        q = self.wq(a).view(B, T, self.heads, d // self.heads)
        k, v = (w(a).view(B, T, self.kv_heads, d // self.heads) for w in (self.wk, self.wv))
        q, k = _apply_rotary(q, k, freqs_cis)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True,
                                           enable_gqa=self.kv_heads != self.heads)
        x = x + self.wo(o.transpose(1, 2).reshape(B, T, d))
        b = self.n2(x)
        return x + self.w2(F.silu(self.w1(b)) * self.w3(b))


class Rotary(nn.Module):
    def __init__(self, vocab=64, d=16, max_len=24):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(RotaryBlock(d) for _ in range(2))
        self.norm = nn.RMSNorm(d)
        self.out = nn.Linear(d, vocab, bias=False)
        self.register_buffer("freqs_cis", _rope(d // 2, max_len), persistent=False)

    def forward(self, tokens, labels):
        h = self.emb(tokens)
        freqs_cis = self.freqs_cis[: tokens.shape[1]]
        for block in self.blocks:
            h = block(h, freqs_cis)
        return F.cross_entropy(self.out(self.norm(h)).flatten(0, 1), labels.flatten())


def rotary():
    return Rotary(), (torch.randint(0, 64, (2, 12)), torch.randint(0, 64, (2, 12)))


class ComplexOps(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 16)
        self.freq = nn.Parameter(torch.randn(8) * 0.3)
        self.head = nn.Linear(24, C)

    def forward(self, x, labels):
        h = self.inp(x)  # [B, S, 16]
        z = torch.view_as_complex(h.reshape(*h.shape[:-1], 8, 2))  # [B, S, 8]
        pos = torch.arange(x.shape[1], dtype=torch.float32)[:, None]
        rot = torch.polar(torch.ones(x.shape[1], 8), pos * self.freq)
        w = torch.complex(h[..., :8], torch.tanh(h[..., 8:]))
        y = z * rot + 0.5 * w.conj() - w / 3.0 + h[..., :8]
        y = y + z / (rot + 1.5) + h[..., 8:] / (rot - 1.5) + torch.reciprocal(rot + 2.0)
        y = torch.cat([y, torch.exp(0.1 * z)], dim=-1).transpose(1, 2)  # [B, 16, S]
        s = y.sum(-1) / x.shape[1]
        feats = torch.cat([s.real, s.imag[:, :4], y.abs().mean(-1)[:, :4]], -1)
        return F.cross_entropy(self.head(feats), labels)


def complex_ops():
    return ComplexOps(), (torch.randn(2, S, 4), torch.randint(0, C, (2,)))


class Distances(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 6))
        self.head = nn.Linear(1, 4)
        self.triplet = nn.TripletMarginLoss()
        self.m, self.v = nn.Parameter(torch.randn(6, 4) / 2), nn.Parameter(torch.randn(4) / 2)

    def forward(self, a, p, n, y):
        shift = torch.mv(self.m, self.v)  # [6]
        ea, ep, en = (self.embed(t) + shift for t in (a, p, n))
        d = F.pairwise_distance(ea, en, keepdim=True)
        out = self.head(d)
        return (self.triplet(ea, ep, en)
                + F.triplet_margin_loss(ea, ep, en, margin=0.5, p=1, swap=True, reduction="sum") / 4
                + nn.GaussianNLLLoss()(out[:, :2], y[:, :2], F.softplus(out[:, 2:]) + 1e-3)
                + F.kl_div(F.log_softmax(ea, -1), F.log_softmax(en, -1), reduction="batchmean",
                           log_target=True)
                + F.multilabel_soft_margin_loss(ep[:, :4], (y > 0).float())
                + 0.01 * torch.dot(self.v, self.v))


def distances():
    return Distances(), (torch.randn(2, 8), torch.randn(2, 8), torch.randn(2, 8), torch.randn(2, 4))


class GlobalFilter(nn.Module):
    def __init__(self, dim=8, h=4, w=4):
        super().__init__()
        self.complex_weight = nn.Parameter(torch.randn(h, w // 2 + 1, dim, 2) * 0.02)
        self.inp = nn.Linear(3, dim)
        self.head = nn.Linear(dim, C)
        self.h, self.w = h, w

    def forward(self, x, labels):  # x [B, h * w, 3]
        h = self.inp(x)
        B, N, D = h.shape
        f = torch.fft.rfft2(h.view(B, self.h, self.w, D), dim=(1, 2), norm="ortho")
        f = f * torch.view_as_complex(self.complex_weight)
        g = torch.fft.irfft2(f, s=(self.h, self.w), dim=(1, 2), norm="ortho")
        return F.cross_entropy(self.head((h + g.reshape(B, N, D)).mean(1)), labels)


def gfnet():
    return GlobalFilter(), (torch.randn(2, 16, 3), torch.randint(0, C, (2,)))


class FFTTour(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 6)
        self.mix = nn.Parameter(torch.randn(6, 6, 2) * 0.3)
        self.kernel = nn.Parameter(torch.randn(6, 7) * 0.3)
        self.head = nn.Linear(6 + 7 + 6, C)

    def forward(self, x, labels):  # x [B, 7, 4]
        h = self.inp(x)  # [B, 7, 6]
        f = torch.fft.fft(h, dim=1) @ torch.view_as_complex(self.mix)
        back = torch.fft.ifft(f, dim=1, norm="forward").real
        r = torch.fft.rfft(h, dim=-1, norm="ortho")  # [B, 7, 4]
        energy = torch.einsum("btk,btk->bt", r, r.conj()).real  # [B, 7]
        g = torch.fft.irfft(r, n=6, dim=-1, norm="ortho")
        odd = torch.fft.irfft(torch.fft.rfft(h, dim=1), n=7, dim=1)
        spectrum = torch.fft.fftn(h, dim=(1, 2)).abs().mean(1)  # [B, 6]
        # A long convolution (S4 / Hyena): zero-padded to 2L by n, cut back.
        u = h.transpose(1, 2)  # [B, 6, 7]
        conv = torch.fft.irfft(torch.fft.rfft(u, n=14) * torch.fft.rfft(self.kernel, n=14),
                               n=14)[..., :7]
        trimmed = torch.fft.ifftn(torch.fft.fft(h, n=5, dim=1), s=(4, 6)).real.mean(1)
        feats = torch.cat([(back + g + odd).mean(1) + trimmed + conv.mean(-1), energy,
                           spectrum / 10], -1)
        return F.cross_entropy(self.head(feats), labels)


def ffttour():
    return FFTTour(), (torch.randn(2, 7, 4), torch.randint(0, C, (2,)))


class FNet(nn.Module):
    def __init__(self):
        super().__init__()
        import transformers as T
        self.m = T.FNetForSequenceClassification(T.FNetConfig(
            vocab_size=64, hidden_size=16, num_hidden_layers=2, intermediate_size=32,
            max_position_embeddings=16, type_vocab_size=2, hidden_dropout_prob=0.0))

    def forward(self, ids, cls):
        return self.m(input_ids=ids, labels=cls).loss


def fnet():
    ids = torch.randint(0, 64, (2, 12))
    ids[0, 0], ids[1, 0] = 0, 63  # the range the oracle draws from
    return FNet(), (ids, torch.tensor([0, 1]))


class UnevenPools(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.head = nn.Linear(6 * 9 + 6 * 4, C)

    def forward(self, x, labels):  # x [B, 3, 5, 7]
        h = self.conv(x)
        a = F.adaptive_avg_pool2d(h, (3, 3))
        m = F.adaptive_max_pool2d(h, (2, 2))
        return F.cross_entropy(self.head(torch.cat([a.flatten(1), m.flatten(1)], 1)), labels)


def uneven_pools():
    return UnevenPools(), (torch.randn(2, 3, 5, 7), torch.randint(0, C, (2,)))


class Shuffled(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.shuffle = nn.ChannelShuffle(2)
        self.head = nn.Linear(8, C)

    def forward(self, x, labels):
        h = self.shuffle(self.conv(x))
        h = (F.softmin(h, dim=1) + nn.Softmax2d()(h) + F.tanhshrink(h)
             + F.threshold(h, 0.1, -1.0) + F.hardtanh(h, -0.5, 0.5))
        return F.cross_entropy(self.head(h.mean((2, 3)) + F.logsigmoid(h.amax((2, 3)))), labels)


def shuffled():
    return Shuffled(), (torch.randn(2, 4, 4, 4), torch.randint(0, C, (2,)))


class SpectralConv2d(nn.Module):
    def __init__(self, cin, cout, m1, m2):
        super().__init__()
        scale = 1 / (cin * cout)
        self.m1, self.m2, self.cout = m1, m2, cout
        self.weights1 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, dtype=torch.cfloat))
        self.weights2 = nn.Parameter(scale * torch.rand(cin, cout, m1, m2, dtype=torch.cfloat))

    def forward(self, x):
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(x.shape[0], self.cout, x.size(-2), x.size(-1) // 2 + 1,
                             dtype=torch.cfloat, device=x.device)
        out_ft[:, :, :self.m1, :self.m2] = torch.einsum(
            "bixy,ioxy->boxy", x_ft[:, :, :self.m1, :self.m2], self.weights1)
        out_ft[:, :, -self.m1:, :self.m2] = torch.einsum(
            "bixy,ioxy->boxy", x_ft[:, :, -self.m1:, :self.m2], self.weights2)
        return torch.fft.irfft2(out_ft, s=(x.size(-2), x.size(-1)))


class FNO(nn.Module):
    def __init__(self, width=6):
        super().__init__()
        self.lift = nn.Linear(3, width)
        self.conv0, self.conv1 = SpectralConv2d(width, width, 2, 2), SpectralConv2d(width, width, 2, 2)
        self.w0, self.w1 = nn.Conv2d(width, width, 1), nn.Conv2d(width, width, 1)
        self.proj = nn.Linear(width, 1)

    def forward(self, a, u):  # a [B, 8, 8, 3] -> u [B, 8, 8]
        x = self.lift(a).permute(0, 3, 1, 2)
        x = F.gelu(self.conv0(x) + self.w0(x))
        x = self.conv1(x) + self.w1(x)
        return F.mse_loss(self.proj(x.permute(0, 2, 3, 1)).squeeze(-1), u)


def fno():
    return FNO(), (torch.randn(2, 8, 8, 3), torch.randn(2, 8, 8))


# Each random term of RandomMoments: (expectation, variance) of one draw.
MOMENTS = {
    "randn_sq": (1.0, 2.0), "rand_like": (0.5, 1 / 12),
    "normal_": (2.0, 9.0), "normal_sq": (13.0, 306.0), "uniform_": (1.0, 16 / 12),
    "exponential_": (0.5, 0.25), "gumbel": (0.5772156649, 3.14159265 ** 2 / 6),
    "bernoulli_": (0.3, 0.21), "bernoulli": (0.8, 0.16),
    "randint": (4.5, 99 / 12), "randint_low": (4.0, 2.0), "randint_like": (2.0, 2.0),
    "normal_tensor": (-1.0, 0.25), "independent": (2.0, 8.0), "corr": (0.0, 1.0),
}
# "corr": block 0's first draw times another block's first draw (0 unless
# two stages draw the same numbers).
MOMENT_BLOCKS = [["randn_sq", "rand_like"], ["corr", "normal_", "normal_sq", "uniform_"],
                 ["corr", "exponential_", "gumbel", "bernoulli_", "bernoulli"],
                 ["corr", "randint", "randint_low", "randint_like", "normal_tensor",
                  "independent"]]
MOMENT_DRAWS = 4096


def _draw(name, h, z0):
    B, N = h.shape[0], MOMENT_DRAWS
    big = h[:, :1].expand(B, N)
    if name == "randn_sq":
        return z0.pow(2)
    if name == "corr":
        return z0 * torch.randn(B, N)
    if name == "rand_like":
        return torch.rand_like(big)
    if name == "normal_":
        return h.new_empty(B, N).normal_(2.0, 3.0)
    if name == "normal_sq":
        return h.new_empty(B, N).normal_(2.0, 3.0).pow(2)
    if name == "uniform_":
        return torch.empty(B, N).uniform_(-1.0, 3.0)
    if name == "exponential_":
        return torch.empty_like(big).exponential_(2.0)
    if name == "gumbel":  # as F.gumbel_softmax draws it
        return -torch.empty_like(big).exponential_().log()
    if name == "bernoulli_":
        return big.new_empty(B, N).bernoulli_(0.3)
    if name == "bernoulli":
        return torch.bernoulli(torch.full_like(big, 0.8))
    if name == "randint":
        return torch.randint(0, 10, (B, N)).float()
    if name == "randint_low":
        return torch.randint(2, 7, (B, N)).float()
    if name == "randint_like":
        return torch.randint_like(big, 5)
    if name == "normal_tensor":
        return torch.normal(torch.full_like(big, -1.0), 0.5)
    if name == "independent":
        return (torch.randn(B, N) - torch.randn(B, N)).pow(2)
    raise KeyError(name)


class MomentBlock(nn.Module):
    def __init__(self, names):
        super().__init__()
        self.names = names
        self.lin = nn.Linear(8, 8)
        self.w = nn.Parameter(torch.ones(len(names)))

    def forward(self, h, acc, z0):
        h = torch.tanh(self.lin(h))
        if z0 is None:
            z0 = torch.randn(h.shape[0], MOMENT_DRAWS)
        for i, name in enumerate(self.names):
            acc = acc + self.w[i] * _draw(name, h, z0).mean(1)
        return h, acc, z0


class RandomMoments(nn.Module):
    """Sample means of random draws made inside forward, each times its
    own weight: after one SGD step a weight has moved by lr x its mean."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(MomentBlock(n) for n in MOMENT_BLOCKS)

    def forward(self, x):
        h, acc, z0 = x, torch.zeros_like(x[:, 0]), None
        for blk in self.blocks:
            h, acc, z0 = blk(h, acc, z0)
        return acc.mean() + 0.01 * h.pow(2).mean()


def random_moments():
    return RandomMoments(), (torch.randn(2, 8),)


class Diffusion(nn.Module):
    def __init__(self, d=12, width=32, T=100):
        super().__init__()
        self.T = T
        betas = torch.linspace(1e-4, 0.02, T)
        cum = torch.cumprod(1 - betas, 0)
        self.register_buffer("sqrt_cum", cum.sqrt())
        self.register_buffer("sqrt_one_minus_cum", (1 - cum).sqrt())
        self.time = nn.Sequential(nn.Linear(16, width), nn.SiLU(), nn.Linear(width, width))
        self.inp = nn.Linear(d, width)
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(3))
        self.out = nn.Linear(width, d)

    def embed(self, t):
        half = 8
        freqs = torch.exp(-torch.log(torch.tensor(10000.0)) * torch.arange(half) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([args.sin(), args.cos()], -1)

    def forward(self, x):
        t = torch.randint(0, self.T, (x.shape[0],), device=x.device)
        noise = torch.randn_like(x)
        xt = self.sqrt_cum[t][:, None] * x + self.sqrt_one_minus_cum[t][:, None] * noise
        temb = self.time(self.embed(t))
        h = self.inp(xt)
        for blk in self.blocks:
            h = h + F.silu(blk(h + temb))
        return F.mse_loss(self.out(h), noise)


def diffusion():
    return Diffusion(), (torch.randn(2, 12),)


def _drop_path(x, p, training):
    if p == 0.0 or not training:
        return x
    keep = 1 - p
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    mask = x.new_empty(shape).bernoulli_(keep)
    mask.div_(keep)
    return x * mask


class PathBlock(nn.Module):
    def __init__(self, d, p):
        super().__init__()
        self.norm, self.fc, self.p = nn.LayerNorm(d), nn.Linear(d, d), p

    def forward(self, x):
        return x + _drop_path(F.gelu(self.fc(self.norm(x))), self.p, self.training)


class Stochastic(nn.Module):
    def __init__(self, d=16, latent=8, codes=12):
        super().__init__()
        self.enc = nn.Linear(d, 2 * latent)
        self.dec = nn.Linear(latent, d)
        self.blocks = nn.Sequential(*(PathBlock(d, 0.25) for _ in range(4)))
        self.logits = nn.Linear(d, codes)
        self.codebook = nn.Parameter(torch.randn(codes, d) * 0.1)
        self.head = nn.Linear(d, C)

    def forward(self, x, labels):
        mu, logvar = self.enc(x).chunk(2, -1)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        kld = -0.5 * torch.mean(torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), -1))
        h = self.blocks(self.dec(z))
        onehot = F.gumbel_softmax(self.logits(h), tau=0.7, hard=True)
        h = h + onehot @ self.codebook
        return F.cross_entropy(self.head(h), labels) + 0.1 * kld


def stochastic():
    return Stochastic(), (torch.randn(2, 16), torch.randint(0, C, (2,)))


class GCN(nn.Module):
    def __init__(self, n=6, d=8):
        super().__init__()
        src = torch.tensor([0, 1, 2, 3, 4, 5, 0, 2])
        dst = torch.tensor([1, 2, 3, 4, 5, 0, 3, 5])
        self.register_buffer("src", src)
        self.register_buffer("dst", dst)
        deg = torch.zeros(n).index_add_(0, dst, torch.ones(8)) + 1
        self.register_buffer("norm", deg.rsqrt())
        self.layers = nn.ModuleList([nn.Linear(d, 16), nn.Linear(16, 16), nn.Linear(16, 16)])
        self.head = nn.Linear(16, C)

    def propagate(self, h):  # h [B, nodes, d]
        msg = h[:, self.src] * self.norm[self.src][None, :, None]
        out = torch.zeros_like(h).index_add_(1, self.dst, msg, alpha=0.5)
        return (out + h) * self.norm[None, :, None]

    def forward(self, x, labels):
        for layer in self.layers:
            x = F.relu(self.propagate(layer(x)))
        return F.cross_entropy(self.head(x.mean(1)), labels)


def gcn():
    return GCN(), (torch.randn(2, 6, 8), torch.randint(0, C, (2,)))


def _off_diagonal(x):
    n, m = x.shape
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class Barlow(nn.Module):
    def __init__(self, d=8, e=12):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                                 nn.Linear(16, e))
        self.proj = nn.Linear(e, e)

    def forward(self, x, x2):
        z1, z2 = self.proj(self.net(x)), self.proj(self.net(x2))
        c = z1.T @ z2 / 8.0  # the batch size, a constant as in the reference code
        on = torch.diagonal(c).add(-1).pow(2).sum()
        return on + 0.005 * _off_diagonal(c).pow(2).sum()


def barlow():
    return Barlow(), (torch.randn(2, 8), torch.randn(2, 8))


class IndexWrites(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 4)
        self.sq = nn.Parameter(torch.randn(4, 4) * 0.5)
        self.head = nn.Linear(12, C)

    def forward(self, x, labels):
        h = self.a(x).clone()
        h[h < 0] = 0.0
        h[:, torch.tensor([1, -2])] = 1.0  # index_fill_, a negative index
        g = self.b(h).view(-1, 2, 4)
        g[:, :, torch.tensor([0, 2])] = self.c(x).view(-1, 2, 2)
        k = g.index_copy(2, torch.tensor([3, 0]), g[:, :, :2] * 2)
        sq = torch.index_put(self.sq, (torch.tensor([1, 0, 1]),), self.c.bias[None, :],
                             accumulate=True)
        m = torch.diag(sq) + torch.diagonal(sq, 1).sum() + torch.trace(sq)
        e = torch.diag_embed(k[:, 0])            # [B, 4, 4]
        feats = (e @ m).flatten(1)[:, :4] + torch.diag(torch.diag(self.sq)).sum(0)
        return F.cross_entropy(self.head(torch.cat([k.flatten(1), feats], 1)), labels)


def index_writes():
    return IndexWrites(), (torch.randn(2, 8), torch.randint(0, C, (2,)))


class WaveNet(nn.Module):
    def __init__(self, ch=8, layers=4):
        super().__init__()
        self.inp = nn.Conv1d(1, ch, 1)
        self.filt = nn.ModuleList(nn.Conv1d(ch, ch, 2, dilation=2 ** i) for i in range(layers))
        self.gate = nn.ModuleList(nn.Conv1d(ch, ch, 2, dilation=2 ** i) for i in range(layers))
        self.res = nn.ModuleList(nn.Conv1d(ch, ch, 1) for _ in range(layers))
        self.skip = nn.ModuleList(nn.Conv1d(ch, ch, 1) for _ in range(layers))
        self.out = nn.Conv1d(ch, 16, 1)

    def forward(self, x, y):  # x [B, 1, T], y [B, T] in [0, 16)
        h, skips = self.inp(x), 0
        for i in range(len(self.filt)):
            p = F.pad(h, (2 ** i, 0))
            z = torch.tanh(self.filt[i](p)) * torch.sigmoid(self.gate[i](p))
            skips = skips + self.skip[i](z)
            h = h + self.res[i](z)
        return F.cross_entropy(self.out(F.relu(skips)), y)


def wavenet():
    return WaveNet(), (torch.randn(2, 1, 16), torch.randint(0, 16, (2, 16)))


class S4D(nn.Module):
    """S4D kernel: diagonal complex state matrix, Vandermonde kernel, FFT conv."""
    def __init__(self, d=8, N=4, L=16):
        super().__init__()
        self.L = L
        self.log_dt = nn.Parameter(torch.rand(d) * 0.1 - 3)
        self.log_A_real = nn.Parameter(torch.log(0.5 * torch.ones(d, N)))
        self.A_imag = nn.Parameter(torch.pi * torch.arange(N).float().repeat(d, 1))
        self.C = nn.Parameter(torch.randn(d, N, 2) * 0.5)
        self.D = nn.Parameter(torch.randn(d))
        self.inp = nn.Linear(1, d)
        self.out = nn.Linear(d, 1)

    def forward(self, u, y):  # u [B, L], y [B, L]
        x = self.inp(u.unsqueeze(-1)).transpose(1, 2)  # [B, d, L]
        dt = torch.exp(self.log_dt)
        Cc = torch.view_as_complex(self.C)
        A = -torch.exp(self.log_A_real) + 1j * self.A_imag
        dtA = A * dt.unsqueeze(-1)
        K = dtA.unsqueeze(-1) * torch.arange(self.L)
        Cc = Cc * (torch.exp(dtA) - 1.0) / A
        k = 2 * torch.einsum("hn,hnl->hl", Cc, torch.exp(K)).real
        kf = torch.fft.rfft(k, n=2 * self.L)
        uf = torch.fft.rfft(x, n=2 * self.L)
        yy = torch.fft.irfft(uf * kf, n=2 * self.L)[..., :self.L] + x * self.D.unsqueeze(-1)
        return F.mse_loss(self.out(F.gelu(yy).transpose(1, 2)).squeeze(-1), y)


def s4d():
    return S4D(), (torch.randn(2, 16), torch.randn(2, 16))


class RWKVish(nn.Module):
    """RWKV-like time mixing: token shift, exponential decay WKV as a loop."""
    def __init__(self, d=8, T=6):
        super().__init__()
        self.emb = nn.Embedding(20, d)
        self.mix = nn.Parameter(torch.rand(d))
        self.k, self.v, self.r = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.w = nn.Parameter(-torch.rand(d))
        self.u = nn.Parameter(torch.rand(d))
        self.out = nn.Linear(d, 20)

    def forward(self, ids, labels):
        x = self.emb(ids)
        xx = F.pad(x, (0, 0, 1, -1))  # token shift
        xm = x * self.mix + xx * (1 - self.mix)
        k, v, r = self.k(xm), self.v(xm), torch.sigmoid(self.r(xm))
        B, T, D = x.shape
        num = torch.zeros(B, D)
        den = torch.zeros(B, D)
        outs = []
        w = torch.exp(self.w)
        for t in range(T):
            kt, vt = k[:, t], v[:, t]
            e = torch.exp(self.u + kt)
            outs.append((num + e * vt) / (den + e))
            num = num * torch.exp(-w) + torch.exp(kt) * vt
            den = den * torch.exp(-w) + torch.exp(kt)
        y = r * torch.stack(outs, 1)
        return F.cross_entropy(self.out(x + y).flatten(0, 1), labels.flatten())


def rwkv():
    return RWKVish(), (torch.randint(0, 20, (2, 6)), torch.randint(0, 20, (2, 6)))


class Special(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh())
        self.params = nn.Linear(16, 10)

    def forward(self, x, counts):
        p = self.params(self.body(x))
        pos = F.softplus(p) + 0.5
        y = torch.sigmoid(x[:, :2]) * 0.9 + 0.05  # in (0, 1)
        D, v = torch.distributions, False  # (validation would check the data)
        ll = D.Gamma(pos[:, 0], pos[:, 1], validate_args=v).log_prob(y[:, 0] + 0.5)
        ll = ll + D.Beta(pos[:, 2], pos[:, 3], validate_args=v).log_prob(y[:, 1])
        ll = ll + D.StudentT(pos[:, 4], p[:, 5], pos[:, 6], validate_args=v).log_prob(x[:, 2])
        ll = ll + D.NegativeBinomial(pos[:, 7], logits=p[:, 8],
                                     validate_args=v).log_prob(counts.float())
        ll = ll + 0.1 * D.Dirichlet(pos[:, :3], validate_args=v).entropy()
        ll = ll + torch.digamma(pos[:, 9]) * 0.1
        z = p[:, :4]
        extra = torch.erfc(z) + torch.erfinv(torch.tanh(z) * 0.9) + torch.logaddexp2(z, -z)
        extra = extra + torch.copysign(z, x[:, :4]) + torch.heaviside(x[:, :4], torch.tensor(0.5)) * z
        bad = torch.isnan(extra) | torch.isinf(extra) | ~torch.isfinite(extra)
        extra = torch.where(bad | torch.logical_xor(z > 5, z > 6), 0.0, extra)
        return -ll.mean() + 0.05 * extra.pow(2).mean()


def special():
    return Special(), (torch.randn(2, 6), torch.tensor([0, 5]))


class Lookups(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.linspace(-2, 2, 7))
        self.fc = nn.Linear(8, 8)
        self.bins = nn.Embedding(8, 4)
        self.core = nn.Parameter(torch.randn(8, 4, 3) * 0.3)
        self.u, self.v = nn.Parameter(torch.randn(8) * 0.3), nn.Parameter(torch.randn(8) * 0.3)
        self.head = nn.Linear(8 + 4 + 3 + 8, C)

    def forward(self, x, labels):
        h = self.fc(x)
        lo = torch.searchsorted(self.edges, h.detach().contiguous())
        hi = torch.searchsorted(self.edges, h.detach().contiguous(), side="right")
        b = self.bins(lo).mean(1) + self.bins(hi).mean(1)        # [B, 4]
        ranked = torch.take_along_dim(h, h.argsort(-1), -1)      # sorted rows
        t = torch.tensordot(h, self.core, dims=1).sum(1)          # [B, 3]
        t = t + torch.tensordot(h.view(-1, 2, 4), self.core.view(2, 4, 12), dims=([1, 2], [0, 1]))[:, :3]
        m = torch.addr(torch.eye(8), self.u, self.v, beta=0.5, alpha=2.0) + torch.outer(self.v, self.u)
        return F.cross_entropy(self.head(torch.cat([ranked, b, t, h @ m], 1)), labels)


def lookups():
    return Lookups(), (torch.randn(2, 8), torch.randint(0, C, (2,)))


class PooledGraph(nn.Module):
    def __init__(self, nodes=6, d=8):
        super().__init__()
        self.register_buffer("src", torch.tensor([0, 1, 2, 3, 4, 5, 0, 2, 1]))
        self.register_buffer("dst", torch.tensor([1, 2, 3, 4, 5, 0, 3, 5, 2]))
        self.nodes = nodes
        self.msg = nn.ModuleList(nn.Linear(d, d) for _ in range(3))
        self.head = nn.Linear(4 * d, C)

    def forward(self, x, labels):  # x [B, nodes, d]
        B, N, D = x.shape
        idx = self.dst[None, :, None].expand(B, -1, D)
        h = x
        for layer in self.msg:
            m = torch.tanh(layer(h))[:, self.src]               # [B, E, D]
            mean = torch.zeros_like(h).scatter_reduce(1, idx, m, "mean", include_self=False)
            peak = h.scatter_reduce(1, idx, m, "amax")           # with self
            low = torch.zeros_like(h).scatter_reduce(1, idx, m, "amin", include_self=False)
            total = h.scatter_add(1, idx, m)
            h = h + 0.5 * mean + 0.2 * (peak - low) + 0.1 * total
        pooled = torch.cat([h.mean(1), h.amax(1), mean.sum(1),
                            torch.zeros_like(h).scatter_reduce(1, idx, m, "sum").mean(1)], 1)
        return F.cross_entropy(self.head(pooled), labels)


def pooled_graph():
    return PooledGraph(), (torch.randn(2, 6, 8), torch.randint(0, C, (2,)))


class InvConv(nn.Module):
    """Glow's invertible 1x1 convolution: y = W x per pixel, logdet = H W slogdet(W)."""
    def __init__(self, c):
        super().__init__()
        w = torch.linalg.qr(torch.randn(c, c))[0]
        self.weight = nn.Parameter(w)

    def forward(self, x):
        B, Cc, H, W = x.shape
        y = F.conv2d(x, self.weight.view(Cc, Cc, 1, 1))
        return y, H * W * torch.slogdet(self.weight)[1]


class Glowish(nn.Module):
    def __init__(self, c=4):
        super().__init__()
        self.steps = nn.ModuleList(InvConv(c) for _ in range(3))
        self.acts = nn.ModuleList(nn.Conv2d(c // 2, c, 3, padding=1) for _ in range(3))

    def forward(self, x):
        logdet = 0
        for inv, net in zip(self.steps, self.acts):
            x, ld = inv(x)
            logdet = logdet + ld
            a, b = x.chunk(2, 1)
            h = net(a)
            s, t = torch.sigmoid(h[:, 0::2] + 2), h[:, 1::2]
            b = (b + t) * s
            logdet = logdet + torch.log(s).flatten(1).sum(1)
            x = torch.cat([a, b], 1)
        logp = -0.5 * (x ** 2).flatten(1).sum(1)
        return -(logp + logdet).mean()


def glow():
    return Glowish(), (torch.randn(2, 4, 4, 4),)


class GP(nn.Module):
    """A per-example exact GP marginal likelihood over K fixed inducing inputs
    (RBF kernel with a learned length scale; Cholesky, cholesky_solve, solve, inverse, det)."""
    def __init__(self, n=5):
        super().__init__()
        self.register_buffer("z", torch.linspace(-2, 2, n)[:, None])
        self.log_ls = nn.Parameter(torch.zeros(()))
        self.log_noise = nn.Parameter(torch.tensor(-1.0))
        self.feat = nn.Linear(3, n)

    def forward(self, x, y):
        d2 = (self.z - self.z.T) ** 2
        K = torch.exp(-0.5 * d2 / torch.exp(2 * self.log_ls)) + torch.exp(self.log_noise) * torch.eye(5)
        L = torch.linalg.cholesky(K)
        f = self.feat(x)                       # [B, n]
        alpha = torch.cholesky_solve(f.T, L)   # [n, B]
        quad = (f.T * alpha).sum(0)            # [B]
        logdet = 2 * torch.log(torch.diagonal(L)).sum()
        sol = torch.linalg.solve(K, f.T).T     # [B, n]
        extra = (torch.inverse(K) @ f.T).T - sol
        return (0.5 * quad + 0.5 * logdet).mean() + F.mse_loss(sol.sum(1), y) \
            + extra.pow(2).mean() + 0.01 * torch.det(K) + 0.01 * torch.logdet(K)


def gp():
    return GP(), (torch.randn(2, 3), torch.randn(2))


class Mahalanobis(nn.Module):
    """Per-example covariance from a network, Cholesky, a batched solve."""
    def __init__(self, d=3):
        super().__init__()
        self.d = d
        self.net = nn.Linear(4, d * d + d)

    def forward(self, x, y):
        p = self.net(x)
        A = p[:, :self.d * self.d].view(-1, self.d, self.d)
        S = A @ A.transpose(1, 2) + torch.eye(self.d)
        L = torch.linalg.cholesky(S)
        diff = y - p[:, self.d * self.d:]
        z = torch.linalg.solve(S, diff)
        nll = 0.5 * (diff * z).sum(1) + torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(1)
        return nll.mean() + 0.1 * torch.slogdet(S)[1].mean()


def mahalanobis():
    return Mahalanobis(), (torch.randn(2, 4), torch.randn(2, 3))


class DLRM(nn.Module):
    """DLRM: bottom MLP on dense features, one embedding per sparse feature,
    pairwise dot interactions (the strictly lower triangle, tril_indices),
    top MLP, BCE with logits."""
    def __init__(self, dense=4, tables=3, vocab=20, d=8):
        super().__init__()
        self.bot = nn.Sequential(nn.Linear(dense, 16), nn.ReLU(), nn.Linear(16, d), nn.ReLU())
        self.emb = nn.ModuleList(nn.EmbeddingBag(vocab, d, mode="sum") for _ in range(tables))
        n = tables + 1
        self.top = nn.Sequential(nn.Linear(d + n * (n - 1) // 2, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, dense, sparse, click):
        x = self.bot(dense)
        ly = [e(sparse[:, i:i + 1]) for i, e in enumerate(self.emb)]
        T = torch.cat([x] + ly, dim=1).view(x.shape[0], -1, x.shape[1])
        Z = torch.bmm(T, torch.transpose(T, 1, 2))
        _, ni, nj = Z.shape
        li, lj = torch.tril_indices(ni, nj, offset=-1)
        Zflat = Z[:, li, lj]
        R = torch.cat([x, Zflat], dim=1)
        return F.binary_cross_entropy_with_logits(self.top(R).squeeze(1), click)


def dlrm():
    return DLRM(), (torch.randn(2, 4), torch.randint(0, 20, (2, 3)), torch.randint(0, 2, (2,)).float())


class CenterNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 2, 1))

    def forward(self, img, peaks, objects):
        gt = peaks.float() * objects.float()[:, None, None, None]  # no objects: all 0
        heat = 0.5 * gt + 0.25 * F.avg_pool2d(gt, 3, 1, 1)
        pred = torch.sigmoid(self.net(img)).clamp(1e-4, 1 - 1e-4)
        pos = gt.eq(1).float()
        neg = gt.lt(1).float()
        pos_loss = (torch.log(pred) * torch.pow(1 - pred, 2) * pos).sum()
        neg_loss = (torch.log(1 - pred) * torch.pow(pred, 2) * torch.pow(1 - heat, 4) * neg).sum()
        return -(pos_loss + neg_loss) / pos.sum().clamp(min=1)


def centernet():
    return CenterNet(), (torch.randn(2, 3, 6, 6), torch.tensor([0, 1]).view(2, 1, 1, 1).expand(2, 2, 6, 6)
                         .contiguous(), torch.tensor([0, 1]))


class Quantiles(nn.Module):
    """Order statistics of features: quantile (number and tensor levels,
    every interpolation), kthvalue, median."""
    def __init__(self, d=12, h=16):
        super().__init__()
        self.fc = nn.Linear(d, h)
        self.head = nn.Linear(h + 9, C)

    def forward(self, x, labels):
        h = torch.tanh(self.fc(x))                      # [B, 16]
        q = torch.quantile(h, 0.75, dim=1, keepdim=True)          # [B, 1]
        qs = torch.quantile(h, torch.tensor([0.1, 0.5, 0.9]), dim=-1)  # [3, B]
        lo = torch.quantile(h, 0.3, dim=1, interpolation="lower")
        hi = torch.quantile(h, 0.3, dim=1, interpolation="higher")
        ne = torch.quantile(h, 0.3, dim=1, interpolation="nearest")
        mp = torch.quantile(h, 0.3, dim=1, interpolation="midpoint")
        kv, ki = torch.kthvalue(h, 3, dim=1)
        feats = torch.cat([h, q, qs.t(), lo[:, None], hi[:, None], ne[:, None], mp[:, None],
                           kv[:, None] + 0.01 * ki[:, None].float()], dim=1)
        whole = torch.quantile(self.fc.weight, 0.9)   # all elements
        return F.cross_entropy(self.head(feats), labels) + 0.1 * whole


class WeightStats(nn.Module):
    """Regularizers on weight matrices: corrcoef decorrelation, covariance
    trace, cov of a 1-D parameter, kron-factored and block-diagonal
    layers, ldexp scaling."""
    def __init__(self, d=16):
        super().__init__()
        self.a = nn.Parameter(torch.randn(4, 4) * 0.3)
        self.b = nn.Parameter(torch.randn(4, 4) * 0.3)
        self.w1 = nn.Parameter(torch.randn(8, 8) * 0.2)
        self.w2 = nn.Parameter(torch.randn(4, 8) * 0.2)
        self.v = nn.Parameter(torch.randn(6))
        self.register_buffer("e", torch.tensor([1, 0, -1, 2] * 4))
        self.head = nn.Linear(12, C)

    def forward(self, x, labels):                       # x [B, 16]
        h = x @ torch.kron(self.a, self.b)              # [B, 16]
        h = torch.ldexp(torch.tanh(h), self.e)
        blk = torch.block_diag(self.w1, self.w2)        # [12, 16]
        out = self.head(torch.relu(h @ blk.t()))
        reg = torch.corrcoef(self.w1).pow(2).mean() + torch.cov(self.w2).trace() \
            + torch.cov(self.v, correction=0) + torch.cov(self.w1, correction=0).sum()
        return F.cross_entropy(out, labels) + 0.1 * reg


class Running(nn.Module):
    """Running extremes along time (cummax / cummin, values and indices),
    trapezoidal integration by sample points and by dx."""
    def __init__(self, d=6, h=8, t=10):
        super().__init__()
        self.fc = nn.Linear(d, h)
        self.register_buffer("t", torch.linspace(0, 1, t) ** 2)
        self.head = nn.Linear(4 * h, C)

    def forward(self, x, labels):                       # x [B, T, d]
        h = self.fc(x)                                  # [B, T, h]
        mx, ix = torch.cummax(h, dim=1)
        mn, _ = torch.cummin(h, dim=-2)
        area = torch.trapezoid(h, self.t, dim=1)       # [B, h]
        area2 = torch.trapz(mx - mn, dx=0.1, dim=1)
        pos = ix.float().mean(1)
        feats = torch.cat([area, area2, mx[:, -1], pos * 0.1 + mn[:, -1]], dim=1)
        return F.cross_entropy(self.head(feats), labels)


class NanAware(nn.Module):
    """Features masked to NaN where the input says so, reduced with
    nanmean / nansum; count_nonzero as a per-example weight."""
    def __init__(self, d=12, h=16):
        super().__init__()
        self.fc = nn.Linear(d, h)
        self.head = nn.Linear(3, C)

    def forward(self, x, labels):
        h = self.fc(x)
        h = h.masked_fill(x[:, :1] > 0.8, float("nan"))
        a = torch.nanmean(h, dim=1, keepdim=True)
        s = torch.nansum(h, dim=1, keepdim=True)
        c = torch.count_nonzero(x > 0.5, dim=1).float()[:, None]
        logits = self.head(torch.cat([torch.nan_to_num(a), torch.nan_to_num(s), c * 0.1], 1))
        return F.cross_entropy(logits, labels) + 0.01 * torch.nansum(self.fc.weight) \
            + 0.01 * torch.nanmean(self.fc.bias)


class Rotations(nn.Module):
    """Rotation-averaged convolution (rot90 of feature maps, k = 1, 2, 3,
    -1, and dims given in either order)."""
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, C)

    def forward(self, x, labels):                       # x [B, 3, 8, 8]
        ys = [self.conv(torch.rot90(x, k, [2, 3])) for k in (0, 1, 2, 3)]
        back = [torch.rot90(y, -k, (2, 3)) for k, y in enumerate(ys)]
        z = torch.stack(back).mean(0) + torch.rot90(ys[0], 1, [3, 2])
        return F.cross_entropy(self.head(z.mean((2, 3))), labels)


def quantiles():
    return Quantiles(), (torch.randn(2, 12), torch.randint(0, C, (2,)))


def weight_stats():
    return WeightStats(), (torch.randn(2, 16), torch.randint(0, C, (2,)))


def running():
    return Running(), (torch.randn(2, 10, 6), torch.randint(0, C, (2,)))


def nan_aware():
    return NanAware(), (torch.randn(2, 12), torch.randint(0, C, (2,)))


def rotations():
    return Rotations(), (torch.randn(2, 3, 8, 8), torch.randint(0, C, (2,)))


class STFTLoss(nn.Module):
    """A vocoder-style generator trained with a multi-resolution STFT loss
    (spectral convergence + log magnitude), as HiFi-GAN / Parallel WaveGAN."""
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, 8, 9, padding=4), nn.Tanh(), nn.Conv1d(8, 1, 9, padding=4))
        for n in (16, 32):
            self.register_buffer(f"win{n}", torch.hann_window(n))

    def forward(self, x, target):            # x, target [B, 128]
        y = self.net(x[:, None])[:, 0]
        loss = 0
        for n, hop in ((16, 4), (32, 8)):
            w = getattr(self, f"win{n}")
            Y = torch.stft(y, n, hop, n, w, return_complex=True).abs()
            T = torch.stft(target, n, hop, n, w, return_complex=True).abs()
            sc = torch.linalg.norm(T - Y, dim=(1, 2)) / torch.linalg.norm(T, dim=(1, 2))
            mag = F.l1_loss(torch.log(Y + 0.1), torch.log(T + 0.1))
            loss = loss + sc.mean() + mag
        return loss


def stft_loss():
    return STFTLoss(), (torch.randn(2, 128), torch.randn(2, 128))


class MelFront(nn.Module):
    """Log-mel spectrogram front end inside the model (torch.stft, power,
    a mel filterbank matmul), then a small CNN classifier."""
    def __init__(self):
        super().__init__()
        self.register_buffer("win", torch.hann_window(32))
        self.register_buffer("mel", torch.rand(17, 8))
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(4, C)

    def forward(self, wav, labels):
        S = torch.stft(wav, 32, 8, window=self.win, return_complex=True)
        P = S.real ** 2 + S.imag ** 2
        M = torch.log1p(torch.matmul(P.transpose(1, 2), self.mel))
        h = F.relu(self.conv(M[:, None])).mean((2, 3))
        return F.cross_entropy(self.head(h), labels)


def mel_front():
    return MelFront(), (torch.randn(2, 256), torch.randint(0, C, (2,)))


class MaskedTokens(nn.Module):
    """Per-token cross-entropies over the positions a mask selects, as
    users write them: F.cross_entropy(logits[mask], labels[mask]) with class
    weights and label smoothing, and the flattened form."""
    def __init__(self, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.block = Block(F.gelu, False)
        self.cls = nn.Linear(D, C)
        self.register_buffer("w", torch.linspace(0.5, 1.5, C))

    def forward(self, ids, labels, mask):               # [B, S] each
        logits = self.cls(self.block(self.emb(ids)))
        m = mask.bool()
        ce = F.cross_entropy(logits[m], labels[m], weight=self.w, label_smoothing=0.1)
        active = mask.view(-1) == 1
        return ce + F.cross_entropy(logits.view(-1, C)[active], labels.view(-1)[active])


def masked_tokens():
    return MaskedTokens(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)),
                            (torch.arange(2 * S).reshape(2, S) % 3 != 0).long())


class MaskedCompute(nn.Module):
    """Layers on the selected tokens only, written back with index_put and
    masked_scatter; row-wise functions of a selection; means over its rows
    (all by the same mask: one count), a regression's errors among them."""
    def __init__(self, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.norm = nn.LayerNorm(D)
        self.proj = nn.Linear(D, D)
        self.gate = nn.Linear(D, D)
        self.head = nn.Linear(D, C)
        self.reg = nn.Linear(D, 1)

    def forward(self, ids, labels, mask):
        h = self.emb(ids)                               # [B, S, D]
        m = mask > 0
        out = h.clone()
        out[m] = self.proj(self.norm(h[m]))             # index_put of a selection
        g = torch.sigmoid(self.gate(out))[m]
        out = out.masked_scatter(m[..., None], out[m] * g)
        logits = self.head(torch.tanh(out))
        sel = logits[m]                                 # [n, C]
        p = torch.softmax(sel, -1)
        lp = torch.log_softmax(sel, dim=1)
        ent = -(p * lp).sum(-1)                         # a selection of rows
        lse = torch.logsumexp(sel[:, :4], dim=-1, keepdim=True).unsqueeze(-1)
        run = torch.cumsum(p, dim=1)[:, C // 2]
        onehot = F.one_hot(labels[m], C).float()
        bce = F.binary_cross_entropy_with_logits(sel, onehot, reduction="none").sum(-1)
        picked = torch.masked_select(logits[..., 0], m)
        pred = self.reg(out).squeeze(-1)
        target = labels.float() / C
        mse = ((pred - target)[m] ** 2).mean()
        return ent.mean() + 0.1 * lse[:, 0, 0].mean() + run.mean() + bce.mean() \
            + (picked ** 2).mean() + mse + F.smooth_l1_loss(pred[m], target[m])


def masked_compute():
    return MaskedCompute(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)),
                             (torch.arange(2 * S).reshape(2, S) % 3 != 0).long())


class MaskedMixed(nn.Module):
    """Means over three different selections added together: each divides
    by its own count of the whole step."""
    def __init__(self, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.block = Block(F.gelu, True)
        self.gen = nn.Linear(D, C)
        self.disc = nn.Linear(D, 1)

    def forward(self, ids, labels, mask, attention_mask):
        h = self.block(self.emb(ids))
        m = mask > 0
        gen = F.cross_entropy(self.gen(h)[m], labels[m])
        active = attention_mask.view(-1, ids.shape[1]) == 1
        logits = self.disc(h).squeeze(-1)
        disc = F.binary_cross_entropy_with_logits(logits[active], m[active].float())
        far = labels > C // 2
        reg = ((logits - 0.5)[far] ** 2).mean()
        return gen + 0.5 * disc + 0.1 * reg


def masked_mixed():
    return MaskedMixed(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)),
                           (torch.arange(2 * S).reshape(2, S) % 3 != 0).long(),
                           (torch.arange(2 * S).reshape(2, S) % 5 != 4).long())


class BatchStats(nn.Module):
    """Batch statistics written by hand: features centred by the batch's
    mean and scaled by the mean over the selected tokens."""
    def __init__(self, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.head = nn.Linear(D, C)

    def forward(self, ids, labels, mask):
        h = self.emb(ids)                               # [B, S, D]
        h = h - h.mean(0, keepdim=True)
        h = h / (1 + h[mask > 0].abs().mean())
        return F.cross_entropy(self.head(h).flatten(0, 1), labels.flatten())


def batch_stats():
    return BatchStats(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)),
                          (torch.arange(2 * S).reshape(2, S) % 3 != 0).long())


class BatchSoftmax(nn.Module):
    """Weights normalized over the examples (a softmax along dimension 0):
    each example's weight depends on every other example of the batch."""
    def __init__(self, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.score = nn.Linear(D, 1)
        self.head = nn.Linear(D, C)

    def forward(self, ids, labels):
        h = self.emb(ids)                               # [B, S, D]
        w = self.score(h).softmax(0)                    # over the examples
        return F.cross_entropy(self.head(h * w).flatten(0, 1), labels.flatten())


def batch_softmax():
    return BatchSoftmax(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)))


class BatchNumbering(nn.Module):
    """torch.arange over the batch size used as data: a learned embedding of
    each example's place in the batch (each micro-batch numbers its own
    examples from 0), next to arange as an index (logits[arange(B), ...],
    the same rows whatever the micro-batch)."""
    def __init__(self, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.slot = nn.Embedding(8, D)
        self.head = nn.Linear(D, C)

    def forward(self, ids, labels):
        b = torch.arange(ids.shape[0])
        h = self.emb(ids) + self.slot(b)[:, None, :]    # [B, S, D]
        first = self.head(h)[b, 0]                      # [B, C]: an index
        return F.cross_entropy(self.head(h).flatten(0, 1), labels.flatten()) \
            + 0.1 * first.logsumexp(-1).mean()


def batch_numbering():
    return BatchNumbering(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)))


class GatedShared(nn.Module):
    """ALBERT-like: one block applied 6 times, with a small learned gate
    after layers 0 and 3 (the same parameter twice, far apart). The layers
    are not back to back (the gate sits between some), and the gate's uses
    span three layers: cut-point discovery found 2 sections, 89% of the
    work in the first, until it counted every occurrence of the layer and
    tied the small gate across the stages holding it."""
    def __init__(self, v=32, layers=6):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.ln = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 2 * D)
        self.fc2 = nn.Linear(2 * D, D)
        self.gate = nn.Parameter(torch.randn(D) * 0.5)
        self.head = nn.Linear(D, C)
        self.layers = layers

    def forward(self, ids, labels):
        h = self.emb(ids)
        for i in range(self.layers):
            h = h + self.fc2(F.gelu(self.fc1(self.ln(h))))
            if i in (0, self.layers // 2):
                h = h * torch.sigmoid(self.gate)
        return F.cross_entropy(self.head(h).flatten(0, 1), labels.flatten())


def gated_shared():
    return GatedShared(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)))


class ShiftRight(nn.Module):
    """Hugging Face's shift_tokens_right (BART, T5): the decoder's inputs are
    the labels moved one place right, written in place -- exported to ONNX
    as a scatter_nd whose index tuples start with torch.arange over the
    batch (the row): an index of the examples, exact at any micro-batch."""
    def __init__(self, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.head = nn.Linear(D, C)

    def forward(self, ids, labels):
        shifted = labels.new_zeros(labels.shape)
        shifted[:, 1:] = labels[:, :-1].clone()
        shifted[:, 0] = 2
        h = self.emb(ids) + self.emb(shifted)
        return F.cross_entropy(self.head(h).flatten(0, 1), labels.flatten())


def shift_right():
    return ShiftRight(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)))


class BatchPick(nn.Module):
    """An example picked by its position in the batch (h[torch.tensor([0])]:
    the batch's first example; each micro-batch has its own first)."""
    def __init__(self, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.head = nn.Linear(D, C)

    def forward(self, ids, labels):
        h = self.emb(ids)                               # [B, S, D]
        anchor = h[torch.tensor([0])]                   # [1, S, D]
        return F.cross_entropy(self.head(h + anchor).flatten(0, 1), labels.flatten())


def batch_pick():
    return BatchPick(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)))


class BatchStd(nn.Module):
    """A variance-regularized loss: the mean of the per-example losses plus
    their standard deviation over the batch (unbiased, as torch's std)."""
    def __init__(self, v=32):
        super().__init__()
        self.emb = nn.Embedding(v, D)
        self.head = nn.Linear(D, C)

    def forward(self, ids, labels):
        per = F.cross_entropy(self.head(self.emb(ids)).transpose(1, 2), labels,
                              reduction="none").mean(1)   # [B]
        return per.mean() + 0.5 * per.std()


def batch_std():
    return BatchStd(), (torch.randint(0, 32, (2, S)), torch.randint(0, C, (2, S)))


class SkipAux(nn.Module):
    """Values that middle stages pass on unchanged: an auxiliary loss from
    the first block (added to the last stage's loss) and a skip connection
    from the embedding to the head, both crossing the stages in between.
    Zero-bubble's split backward once sent their gradients back empty there
    (the received tensor, read by no op, had no gradient accumulator left
    when the walk looked for it) and accumulated them in W instead."""

    def __init__(self, vocab=30, d=16, depth=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))
        self.mid = nn.Linear(d, vocab, bias=False)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids, labels):
        h = self.emb(ids)
        skip = h
        for i, b in enumerate(self.blocks):
            h = h + torch.tanh(b(h))
            if i == 0:
                aux = F.cross_entropy(self.mid(h).flatten(0, 1), ids.flatten())
        main = F.cross_entropy(self.head(self.ln(h + skip)).flatten(0, 1), labels.flatten())
        return main + 0.3 * aux


def skip_aux():
    return SkipAux(), (torch.randint(0, 30, (2, 8)), torch.randint(0, 30, (2, 8)))


class LeftPadded(nn.Module):
    """Left padding under a causal mask (nn.MultiheadAttention with
    key_padding_mask, need_weights=False: scaled_dot_product_attention): a
    query whose keys are all padding attends to nothing -- zeros in
    PyTorch (its _safe_softmax), where a plain softmax gives NaN."""

    def __init__(self, vocab=10, d=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.att = nn.MultiheadAttention(d, 2, batch_first=True)
        self.mid = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab)

    def forward(self, ids, labels):
        T = ids.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        h = self.emb(ids)
        a = self.att(h, h, h, attn_mask=causal, key_padding_mask=ids < 3,
                     need_weights=False)[0]
        h = h + torch.tanh(self.mid(h + a))
        return F.cross_entropy(self.out(h).flatten(0, 1), labels.flatten())


def left_padded():
    return LeftPadded(), (torch.tensor([[0, 3, 4, 5, 6, 7], [1, 2, 9, 3, 4, 5]]),
                          torch.tensor([[0, 3, 4, 5, 6, 7], [1, 2, 9, 3, 4, 5]]))


class SumCE(nn.Module):
    """Per-example losses written with reduction="sum" and divided by the
    batch size (F.cross_entropy and F.nll_loss, label smoothing, an ignored
    label): each is the sum of its "none" form over the batch. Before:
    "dividing by the batch size B: the dividend is not a sum"."""

    def __init__(self, smoothing=0.1):
        super().__init__()
        self.smoothing = smoothing
        self.embed = nn.Embedding(VOCAB, D)
        self.body = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.Linear(D, VOCAB))

    def forward(self, input_ids, labels):
        logits = self.body(self.embed(input_ids)).flatten(0, 1)
        targets = labels.masked_fill(labels % 5 == 0, -100).flatten()
        ce = F.cross_entropy(logits, targets, reduction="sum",
                             label_smoothing=self.smoothing)
        nll = F.nll_loss(F.log_softmax(logits, -1), targets, reduction="sum")
        return (ce + 0.5 * nll) / input_ids.shape[0]


def sum_ce():
    ids = torch.randint(0, VOCAB, (2, S))
    return SumCE(), (ids, ids.clone())


def sum_ce_onnx():  # torch's ONNX exporter takes no label smoothing
    ids = torch.randint(0, VOCAB, (2, S))
    return SumCE(smoothing=0.0), (ids, ids.clone())


class DenseGAT(nn.Module):
    """Graph attention over a dense adjacency with self loops added by
    torch.eye (ONNX EyeLike: before, "unsupported ONNX op 'EyeLike'"), the
    adjacency computed from the node features."""

    def __init__(self, d=8, classes=3):
        super().__init__()
        self.w = nn.Linear(d, d)
        self.o = nn.Linear(d, classes)

    def forward(self, x, y):
        n = x.shape[1]
        s = x[..., :1]
        adj = (s * s.transpose(1, 2) > 0).float() + torch.eye(n)
        h = self.w(x)
        e = torch.einsum("bnd,bmd->bnm", h, h).masked_fill(adj == 0, -1e9).softmax(-1)
        return F.cross_entropy(self.o(e @ h).mean(1), y)


def dense_gat():
    return DenseGAT(), (torch.randn(2, 5, 8), torch.randint(0, 3, (2,)))


class HeldEval(nn.Module):
    """Fine-tuning as usually written: model.train(), then a batch norm
    frozen (its running statistics, set away from 0 and 1 here, normalize;
    its scale and shift still train) and a dropout turned off with .eval().
    A second batch norm trains as usual."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, D)
        self.frozen = nn.BatchNorm1d(D)
        self.off = nn.Dropout(0.5)
        self.norm = nn.BatchNorm1d(D)
        self.l2 = nn.Linear(D, C)
        with torch.no_grad():
            self.frozen.running_mean.uniform_(-0.5, 0.5)
            self.frozen.running_var.uniform_(0.5, 2.0)

    def forward(self, x, labels):
        h = self.off(torch.relu(self.frozen(self.l1(x))))
        return F.cross_entropy(self.l2(torch.relu(self.norm(h))), labels)


def held_eval():
    m = HeldEval()
    m.train()
    m.frozen.eval()
    m.off.eval()
    return m, (torch.randn(2, 4), torch.randint(0, C, (2,)))
