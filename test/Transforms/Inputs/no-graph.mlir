func.func @not_a_graph() {
  return
}
