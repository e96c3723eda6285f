// The hand-written DLC program of the sum embedding bag (ember_xla/dae_target/handwritten.py;
// tests/dae_target/test_dlc_handwritten.py checks that it prints exactly as below). Three
// traversal units (bags, lookups, a vector TU over the row); the id stream chained into the
// contiguous row stream; the row buffer pushed at the end of the row TU with token 1; the output
// row a core variable bumped by token 2. Parses, verifies and prints back to itself.
// RUN: ember-xla opt %s > %t.mlir
// RUN: ember-xla opt %t.mlir | diff %t.mlir -
// RUN: filecheck %s --input-file %t.mlir

// CHECK:      "dlc.configure_access_engine"() ({
// CHECK-NEXT:   %[[TB:[0-9]+]] = "dlc.new_tu"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) :
// CHECK-NEXT:   %[[B:[0-9]+]] = "dlc.get_ind_var"(%[[TB]])
// CHECK:        %[[TJ:[0-9]+]] = "dlc.new_tu"(%[[TB]],
// CHECK-NEXT:   %[[J:[0-9]+]] = "dlc.get_ind_var"(%[[TJ]])
// CHECK-NEXT:   %[[I:[0-9]+]] = "slc.mem_stream"(%ids, %[[J]])
// CHECK-NEXT:   %[[TK:[0-9]+]] = "dlc.new_tu"(%[[TJ]], {{.*}} {vl = 8}
// CHECK-NEXT:   %[[K:[0-9]+]] = "dlc.get_ind_var"(%[[TK]]) : (!dlc.tu) -> !slc.stream<vector<8xindex>>
// CHECK-NEXT:   %[[M:[0-9]+]] = "dlc.get_mask"(%[[TK]])
// CHECK-NEXT:   %[[ROW:[0-9]+]] = "slcv.mem_stream"(%table, %[[I]], %[[K]], %[[M]]) {contiguous = true}
// CHECK-NEXT:   "dlc.register_callback"(%[[TJ]]) {event = "begin", id = 0}
// CHECK-NEXT:   "dlc.register_operand"(%[[TK]], %[[ROW]]) {event = "end"}
// CHECK-NEXT:   "dlc.register_callback"(%[[TK]]) {event = "end", id = 1}
// CHECK-NEXT:   "dlc.register_callback"(%[[TB]]) {event = "iter", id = 2}
// CHECK:      "dlc.compute_loop"(%0) ({
// CHECK:        "dlc.get_var"() {name = "row"}
// CHECK:        "dlc.pop_operand"() : () -> memref<?xf32>
// CHECK:        "slcv.from_buffer"
// CHECK:        "dlc.increment_var"() {name = "row"}
// CHECK:      {cases = [0, 1, 2], vars = ["row"]} : (index) -> index
module @eb_handwritten attributes {entry = @sum_bag} {
  func @sum_bag(%offsets: memref<?xindex>, %ids: memref<?xi32>, %table: memref<?x?xf32>, %out: memref<?x?xf32>) attributes {num_inputs = 3} {
    %0 = "arith.constant"() {value = 0} : () -> index
    %1 = "arith.constant"() {value = 1} : () -> index
    %2 = "arith.constant"() {value = 8} : () -> index
    %3 = "memref.dim"(%offsets) {dim = 0} : (memref<?xindex>) -> index
    %4 = "arith.subi"(%3, %1) : (index, index) -> index
    %5 = "memref.dim"(%table) {dim = 1} : (memref<?x?xf32>) -> index
    %6 = "arith.constant"() {value = 0.0} : () -> vector<8xf32>
    %7 = "slc.to_stream"(%0) : (index) -> !slc.stream<index>
    %8 = "slc.to_stream"(%1) : (index) -> !slc.stream<index>
    %9 = "slc.to_stream"(%4) : (index) -> !slc.stream<index>
    %10 = "slc.to_stream"(%5) : (index) -> !slc.stream<index>
    "dlc.configure_access_engine"() ({
      %11 = "dlc.new_tu"(%7, %9, %8) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> !dlc.tu
      %12 = "dlc.get_ind_var"(%11) : (!dlc.tu) -> !slc.stream<index>
      %13 = "slc.mem_stream"(%offsets, %12) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
      %14 = "slc.alu_stream"(%12, %8) {op = "add"} : (!slc.stream<index>, !slc.stream<index>) -> !slc.stream<index>
      %15 = "slc.mem_stream"(%offsets, %14) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
      %16 = "dlc.new_tu"(%11, %13, %15, %8) : (!dlc.tu, !slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> !dlc.tu
      %17 = "dlc.get_ind_var"(%16) : (!dlc.tu) -> !slc.stream<index>
      %18 = "slc.mem_stream"(%ids, %17) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
      %19 = "dlc.new_tu"(%16, %7, %10, %8) {vl = 8} : (!dlc.tu, !slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> !dlc.tu
      %20 = "dlc.get_ind_var"(%19) : (!dlc.tu) -> !slc.stream<vector<8xindex>>
      %21 = "dlc.get_mask"(%19) : (!dlc.tu) -> !slc.stream<vector<8xi1>>
      %22 = "slcv.mem_stream"(%table, %18, %20, %21) {contiguous = true} : (memref<?x?xf32>, !slc.stream<i32>, !slc.stream<vector<8xindex>>, !slc.stream<vector<8xi1>>) -> !slc.stream<vector<8xf32>>
      "dlc.register_callback"(%16) {event = "begin", id = 0} : (!dlc.tu) -> ()
      "dlc.register_operand"(%19, %22) {event = "end"} : (!dlc.tu, !slc.stream<vector<8xf32>>) -> ()
      "dlc.register_callback"(%19) {event = "end", id = 1} : (!dlc.tu) -> ()
      "dlc.register_callback"(%11) {event = "iter", id = 2} : (!dlc.tu) -> ()
    }) : () -> ()
    %23 = "dlc.compute_loop"(%0) ({
      %24 = "dlc.get_var"() {name = "row"} : () -> index
      "scf.for"(%0, %5, %2) ({
      ^bb0(%c: index):
        %25 = "slcv.mask"(%c, %0, %5, %1) : (index, index, index, index) -> vector<8xi1>
        "vector.maskedstore"(%out, %24, %c, %25, %6) : (memref<?x?xf32>, index, index, vector<8xi1>, vector<8xf32>) -> ()
        "scf.yield"() : () -> ()
      }) : (index, index, index) -> ()
      "dlc.yield"() : () -> ()
    }, {
      %26 = "dlc.pop_operand"() : () -> memref<?xf32>
      %27 = "dlc.get_var"() {name = "row"} : () -> index
      "scf.for"(%0, %5, %2) ({
      ^bb0(%c_1: index):
        %28 = "slcv.mask"(%c_1, %0, %5, %1) : (index, index, index, index) -> vector<8xi1>
        %29 = "vector.maskedload"(%out, %27, %c_1, %28, %6) : (memref<?x?xf32>, index, index, vector<8xi1>, vector<8xf32>) -> vector<8xf32>
        %30 = "slcv.from_buffer"(%26, %c_1) : (memref<?xf32>, index) -> vector<8xf32>
        %31 = "arith.addf"(%29, %30) : (vector<8xf32>, vector<8xf32>) -> vector<8xf32>
        "vector.maskedstore"(%out, %27, %c_1, %28, %31) : (memref<?x?xf32>, index, index, vector<8xi1>, vector<8xf32>) -> ()
        "scf.yield"() : () -> ()
      }) : (index, index, index) -> ()
      "dlc.yield"() : () -> ()
    }, {
      "dlc.increment_var"() {name = "row"} : () -> ()
      "dlc.yield"() : () -> ()
    }) {cases = [0, 1, 2], vars = ["row"]} : (index) -> index
    "func.return"() : () -> ()
  }
}
