// RUN: varuna-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{at most one dimension may depend on the batch B}}
func.func private @two_batch_dims(!varuna.tensor<[B, B], f32>)

// -----

// expected-error @+1 {{unsupported element type 'index'}}
func.func private @bad_element(!varuna.tensor<[4], index>)

// -----

// expected-error @+1 {{batch multiple must be at least 1, got 0}}
func.func private @zero_multiple(!varuna.tensor<[B*0], f32>)

// -----

// expected-error @+1 {{parameter 'w' has a batch-dependent type}}
varuna.param @w : !varuna.tensor<[B, 4], f32>

// -----

// expected-error @+1 {{parameter 'w' of 64 bytes has initial data of 60 bytes}}
varuna.param @w : !varuna.tensor<[4, 4], f32> init #varuna.data<file = "m.onnx", offset = 0, size = 60>

// -----

// expected-error @+1 {{#varuna.data offset and size must be non-negative}}
varuna.param @w : !varuna.tensor<[4, 4], f32> init #varuna.data<file = "m.onnx", offset = -1, size = 64>

// -----

// expected-error @+1 {{#varuna.data digest must be a CRC-32 (0 to 4294967295), got 4294967296}}
varuna.param @w : !varuna.tensor<[4, 4], f32> init #varuna.data<file = "m.onnx", offset = 0, size = 64, digest = 4294967296>

// -----

func.func @unknown_param() {
  // expected-error @+1 {{refers to unknown parameter @nope}}
  %w = varuna.get_param @nope : !varuna.tensor<[4], f32>
  return
}

// -----

varuna.param @w : !varuna.tensor<[4], f32>
func.func @param_type() {
  // expected-error @+1 {{result type '!varuna.tensor<[8], f32>' differs from the type '!varuna.tensor<[4], f32>' of parameter @w}}
  %w = varuna.get_param @w : !varuna.tensor<[8], f32>
  return
}

// -----

func.func @matmul_mismatch(%a: !varuna.tensor<[B, 8], f32>, %b: !varuna.tensor<[4, 3], f32>) {
  // expected-error @+1 {{varuna.matmul: contraction sizes differ (8 in !varuna.tensor<[B, 8], f32> vs 4 in !varuna.tensor<[4, 3], f32>)}}
  %c = varuna.matmul %a, %b : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[4, 3], f32> -> !varuna.tensor<[B, 3], f32>
  return
}

// -----

func.func @broadcast_batch(%a: !varuna.tensor<[B, 8], f32>, %b: !varuna.tensor<[2, 8], f32>) {
  // expected-error @+1 {{varuna.add: cannot broadcast dimension B against 2}}
  %c = varuna.add %a, %b : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[2, 8], f32> -> !varuna.tensor<[B, 8], f32>
  return
}

// -----

func.func @wrong_result(%a: !varuna.tensor<[B, 8], f32>) {
  // expected-error @+1 {{'varuna.add' op inferred type(s) '!varuna.tensor<[B, 8], f32>' are incompatible with return type(s) of operation '!varuna.tensor<[B, 9], f32>'}}
  %c = varuna.add %a, %a : !varuna.tensor<[B, 8], f32>, !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 9], f32>
  return
}

// -----

func.func @baked_reshape(%a: !varuna.tensor<[B, 8], f32>) {
  // expected-error @+1 {{element count B*8 of '!varuna.tensor<[B, 8], f32>' differs from 16 of '!varuna.tensor<[2, 8], f32>' (a fixed target shape for a batch-dependent tensor: the model was exported with its batch size baked into a shape)}}
  %c = varuna.reshape %a : !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[2, 8], f32>
  return
}

// -----

func.func @layer_norm_weight(%a: !varuna.tensor<[B, 8], f32>, %w: !varuna.tensor<[4], f32>) {
  // expected-error @+1 {{varuna.layer_norm: weight has type !varuna.tensor<[4], f32>, expected shape [8]}}
  %c = varuna.layer_norm %a weight %w : !varuna.tensor<[4], f32> {axis = 1 : i64, epsilon = 1.0e-5 : f64} : !varuna.tensor<[B, 8], f32> -> !varuna.tensor<[B, 8], f32>
  return
}

// -----

func.func @unary_int(%a: !varuna.tensor<[B, 8], i64>) {
  // expected-error @+1 {{'tanh' takes a floating-point tensor, got 'i64'}}
  %c = varuna.unary tanh, %a : !varuna.tensor<[B, 8], i64>
  return
}

// -----

func.func @dropout_ratio(%a: !varuna.tensor<[B, 8], f32>) {
  // expected-error @+1 {{ratio must be in [0, 1), got 1.5}}
  %c = varuna.dropout %a, 1.5 : !varuna.tensor<[B, 8], f32>
  return
}

// -----

func.func @ce_labels(%a: !varuna.tensor<[B, 10], f32>, %l: !varuna.tensor<[B, 2], i64>) {
  // expected-error @+1 {{varuna.cross_entropy: labels has type !varuna.tensor<[B, 2], i64>, expected shape [B]}}
  %c = varuna.cross_entropy mean, %a, %l : !varuna.tensor<[B, 10], f32>, !varuna.tensor<[B, 2], i64> -> !varuna.tensor<[], f32>
  return
}

// -----

func.func @conv_groups(%x: !varuna.tensor<[B, 4, 8, 8], f32>, %w: !varuna.tensor<[8, 3, 3, 3], f32>) {
  // expected-error @+1 {{varuna.conv: 4 input channels, weight !varuna.tensor<[8, 3, 3, 3], f32> and 1 groups do not fit}}
  %y = varuna.conv %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : !varuna.tensor<[B, 4, 8, 8], f32>, !varuna.tensor<[8, 3, 3, 3], f32> -> !varuna.tensor<[B, 8, 6, 6], f32>
  return
}

// -----

func.func @slice_batch(%x: !varuna.tensor<[B, 4], f32>) {
  // expected-error @+1 {{varuna.slice: cannot slice the batch-dependent dimension 0}}
  %y = varuna.slice %x {axis = 0 : i64, start = 0 : i64, end = 1 : i64, step = 1 : i64} : !varuna.tensor<[B, 4], f32> -> !varuna.tensor<[1, 4], f32>
  return
}

// -----

func.func @constant_type() {
  // expected-error @+1 {{value type 'tensor<2xf32>' does not match result type '!varuna.tensor<[3], f32>'}}
  %c = varuna.constant dense<[1.0, 2.0]> : tensor<2xf32> -> !varuna.tensor<[3], f32>
  return
}

// -----

// varuna.attention: the feature sizes of query and key_t must agree.
func.func @bad(%q: !varuna.tensor<[B, 2, 8, 4], f32>, %kt: !varuna.tensor<[B, 2, 5, 8], f32>, %v: !varuna.tensor<[B, 2, 8, 4], f32>) -> !varuna.tensor<[B, 2, 8, 4], f32> {
  // expected-error@+1 {{'varuna.attention' op query's feature size 4 differs from key_t's 5}}
  %y = varuna.attention %q, %kt, %v {scale = 1.0 : f64} : !varuna.tensor<[B, 2, 8, 4], f32>, !varuna.tensor<[B, 2, 5, 8], f32>, !varuna.tensor<[B, 2, 8, 4], f32> -> !varuna.tensor<[B, 2, 8, 4], f32>
  return %y : !varuna.tensor<[B, 2, 8, 4], f32>
}

// -----

func.func @attention_mask_type(%q: !varuna.tensor<[B, 2, 8, 4], f32>, %kt: !varuna.tensor<[B, 2, 4, 8], f32>, %v: !varuna.tensor<[B, 2, 8, 4], f32>, %m: !varuna.tensor<[8, 8], f32>) -> !varuna.tensor<[B, 2, 8, 4], f32> {
  // expected-error@+1 {{'varuna.attention' op mask must be i1, not '!varuna.tensor<[8, 8], f32>'}}
  %y = varuna.attention %q, %kt, %v mask %m : !varuna.tensor<[8, 8], f32> {scale = 1.0 : f64} : !varuna.tensor<[B, 2, 8, 4], f32>, !varuna.tensor<[B, 2, 4, 8], f32>, !varuna.tensor<[B, 2, 8, 4], f32> -> !varuna.tensor<[B, 2, 8, 4], f32>
  return %y : !varuna.tensor<[B, 2, 8, 4], f32>
}

// -----

func.func @padding_off_axis(%w: !varuna.tensor<[8, 64], f32>, %ids: !varuna.tensor<[B], i64>) {
  // expected-error @+1 {{padding_idx needs axis 0 (an embedding lookup), not 1}}
  %x = varuna.gather %w, %ids {axis = 1 : i64, padding_idx = 0 : i64} : !varuna.tensor<[8, 64], f32>, !varuna.tensor<[B], i64> -> !varuna.tensor<[8, B], f32>
  return
}

// -----

func.func @padding_outside(%w: !varuna.tensor<[8, 64], f32>, %ids: !varuna.tensor<[B], i64>) {
  // expected-error @+1 {{padding_idx 8 is outside the table's}}
  %x = varuna.gather %w, %ids {axis = 0 : i64, padding_idx = 8 : i64} : !varuna.tensor<[8, 64], f32>, !varuna.tensor<[B], i64> -> !varuna.tensor<[B, 64], f32>
  return
}

// -----

func.func @class_weights_shape(%x: !varuna.tensor<[B, 4], f32>, %y: !varuna.tensor<[B], i64>, %w: !varuna.tensor<[5], f32>) {
  // expected-error @+1 {{class weights must be [C] = !varuna.tensor<[4], f32> (one per class, the logits' element type), got !varuna.tensor<[5], f32>}}
  %l = varuna.cross_entropy mean, %x, %y weight %w : !varuna.tensor<[5], f32> : !varuna.tensor<[B, 4], f32>, !varuna.tensor<[B], i64> -> !varuna.tensor<[], f32>
  return
}

// -----

func.func @smoothing_range(%x: !varuna.tensor<[B, 4], f32>, %y: !varuna.tensor<[B], i64>) {
  // expected-error @+1 {{label_smoothing must be in [0, 1], got 1.5}}
  %l = varuna.cross_entropy mean, %x, %y {label_smoothing = 1.5 : f64} : !varuna.tensor<[B, 4], f32>, !varuna.tensor<[B], i64> -> !varuna.tensor<[], f32>
  return
}

// -----

func.func @conv_transpose_channels(%x: !varuna.tensor<[B, 4, 8, 8], f32>, %w: !varuna.tensor<[3, 2, 3, 3], f32>) {
  // expected-error @+1 {{varuna.conv_transpose: 4 input channels, weight !varuna.tensor<[3, 2, 3, 3], f32> and 1 groups do not fit}}
  %y = varuna.conv_transpose %x, %w {dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>, pads = array<i64: 0, 0>, strides = array<i64: 1, 1>} : !varuna.tensor<[B, 4, 8, 8], f32>, !varuna.tensor<[3, 2, 3, 3], f32> -> !varuna.tensor<[B, 2, 10, 10], f32>
  return
}

// -----

func.func @linalg_not_square(%a: !varuna.tensor<[4, 3], f32>) {
  // expected-error @+1 {{varuna.linalg: the matrix must be [.., n, n] with a static n}}
  %0 = varuna.linalg inv %a : (!varuna.tensor<[4, 3], f32>) -> !varuna.tensor<[4, 3], f32>
  return
}

// -----

func.func @linalg_batch_matrix(%a: !varuna.tensor<[4, B], f32>) {
  // expected-error @+1 {{varuna.linalg: the matrix must be [.., n, n] with a static n}}
  %0 = varuna.linalg det %a : (!varuna.tensor<[4, B], f32>) -> !varuna.tensor<[], f32>
  return
}

// -----

func.func @linalg_solve_rhs(%a: !varuna.tensor<[4, 4], f32>, %b: !varuna.tensor<[B, 3], f32>) {
  // expected-error @+1 {{varuna.linalg solve: the right-hand side must be}}
  %0 = varuna.linalg solve %a, %b : (!varuna.tensor<[4, 4], f32>, !varuna.tensor<[B, 3], f32>) -> !varuna.tensor<[B, 3], f32>
  return
}
