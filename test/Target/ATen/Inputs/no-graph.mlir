module {
  func.func @f(%x: !varuna.tensor<[2], f32>) -> !varuna.tensor<[2], f32> {
    return %x : !varuna.tensor<[2], f32>
  }
}
