// simplify-mem on the bufferized bag: the row gather table[i, k..k+3] has sequential lanes
// (last index = the step-1 vector induction variable, the row index broadcast) and becomes
// one contiguous vector load; the only change is the attribute on that line.
// RUN: ember-xla opt %s --pipeline='simplify-mem' > %t.mlir
// RUN: ember-xla opt %t.mlir | diff %t.mlir -
// RUN: filecheck %s --input-file %t.mlir

// CHECK:      %16 = "slcv.mem_stream"(%arg2, %14, %kv, %mask) {contiguous = true}
// CHECK-NOT:  "slcv.mem_stream"

module @bag attributes {entry = @bag} {
  func @bag(%arg0: memref<?xindex>, %arg1: memref<?xi32>, %arg2: memref<?x?xf32>, %arg3: memref<?x?xf32>) attributes {num_inputs = 3} {
    %0 = "arith.constant"() {value = 0} : () -> index
    %1 = "arith.constant"() {value = 1} : () -> index
    %2 = "memref.dim"(%arg0) {dim = 0} : (memref<?xindex>) -> index
    %3 = "arith.subi"(%2, %1) : (index, index) -> index
    %4 = "memref.dim"(%arg2) {dim = 1} : (memref<?x?xf32>) -> index
    %5 = "slc.to_stream"(%0) : (index) -> !slc.stream<index>
    %6 = "slc.to_stream"(%1) : (index) -> !slc.stream<index>
    %7 = "slc.to_stream"(%3) : (index) -> !slc.stream<index>
    %8 = "slc.to_stream"(%4) : (index) -> !slc.stream<index>
    "slc.for"(%5, %7, %6) ({
    ^bb0(%b: !slc.stream<index>):
      "slc.callback"() ({
        %9 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
        "scf.for"(%0, %4, %1) ({
        ^bb0(%i: index):
          %10 = "arith.constant"() {value = 0.0} : () -> f32
          "memref.store"(%10, %arg3, %9, %i) : (f32, memref<?x?xf32>, index, index) -> ()
          "scf.yield"() : () -> ()
        }) : (index, index, index) -> ()
        "slc.yield"() : () -> ()
      }) : () -> ()
      %11 = "slc.mem_stream"(%arg0, %b) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
      %12 = "slc.alu_stream"(%b, %6) {op = "add"} : (!slc.stream<index>, !slc.stream<index>) -> !slc.stream<index>
      %13 = "slc.mem_stream"(%arg0, %12) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
      "slc.for"(%11, %13, %6) ({
      ^bb0(%j: !slc.stream<index>):
        %14 = "slc.mem_stream"(%arg1, %j) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
        %15 = "slcv.buf_stream"(%8) : (!slc.stream<index>) -> !slc.stream<memref<?xf32>>
        "slcv.for"(%5, %8, %6) ({
        ^bb0(%kv: !slc.stream<vector<4xindex>>, %mask: !slc.stream<vector<4xi1>>):
          %16 = "slcv.mem_stream"(%arg2, %14, %kv, %mask) : (memref<?x?xf32>, !slc.stream<i32>, !slc.stream<vector<4xindex>>, !slc.stream<vector<4xi1>>) -> !slc.stream<vector<4xf32>>
          "slcv.to_buffer"(%16, %15, %kv, %mask) : (!slc.stream<vector<4xf32>>, !slc.stream<memref<?xf32>>, !slc.stream<vector<4xindex>>, !slc.stream<vector<4xi1>>) -> ()
          "slcv.yield"() : () -> ()
        }) {vl = 4, config = "bcast"} : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
        "slc.callback"() ({
          %17 = "slc.from_stream"(%5) : (!slc.stream<index>) -> index
          %18 = "slc.from_stream"(%8) : (!slc.stream<index>) -> index
          %19 = "slc.from_stream"(%6) : (!slc.stream<index>) -> index
          %20 = "arith.constant"() {value = 4} : () -> index
          %21 = "arith.muli"(%19, %20) : (index, index) -> index
          %22 = "slc.from_stream"(%15) : (!slc.stream<memref<?xf32>>) -> memref<?xf32>
          "scf.for"(%17, %18, %21) ({
          ^bb0(%c: index):
            %23 = "slcv.mask"(%c, %17, %18, %19) : (index, index, index, index) -> vector<4xi1>
            %24 = "slcv.from_buffer"(%22, %c) : (memref<?xf32>, index) -> vector<4xf32>
            %25 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
            %26 = "arith.constant"() {value = 0.0} : () -> vector<4xf32>
            %27 = "vector.maskedload"(%arg3, %25, %c, %23, %26) : (memref<?x?xf32>, index, index, vector<4xi1>, vector<4xf32>) -> vector<4xf32>
            %28 = "arith.addf"(%27, %24) : (vector<4xf32>, vector<4xf32>) -> vector<4xf32>
            "vector.maskedstore"(%arg3, %25, %c, %23, %28) : (memref<?x?xf32>, index, index, vector<4xi1>, vector<4xf32>) -> ()
            "scf.yield"() : () -> ()
          }) : (index, index, index) -> ()
          "slc.yield"() : () -> ()
        }) : () -> ()
        "slc.yield"() : () -> ()
      }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
      "slc.yield"() : () -> ()
    }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
    "func.return"() : () -> ()
  }
}
