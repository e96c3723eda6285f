module @slc.bag attributes {entry = @offsets_bag} {
  func @offsets_bag(%table: memref<?x?xf32>, %indices: memref<?xi32>, %offsets: memref<?xi32>, %out: memref<?x?xf32>) attributes {kind = "offsets_bag", num_inputs = 3, output_shapes = [[2, 4]]} {
    %c0 = "arith.constant"() {value = 0} : () -> index
    %c1 = "arith.constant"() {value = 1} : () -> index
    %0 = "slc.to_stream"(%c0) : (index) -> !slc.stream<index>
    %1 = "slc.to_stream"(%c1) : (index) -> !slc.stream<index>
    %N = "memref.dim"(%table) {dim = 0} : (memref<?x?xf32>) -> index
    %D = "memref.dim"(%table) {dim = 1} : (memref<?x?xf32>) -> index
    %2 = "slc.to_stream"(%N) : (index) -> !slc.stream<index>
    %3 = "slc.to_stream"(%D) : (index) -> !slc.stream<index>
    %4 = "memref.dim"(%offsets) {dim = 0} : (memref<?xi32>) -> index
    %B = "arith.subi"(%4, %c1) : (index, index) -> index
    %5 = "slc.to_stream"(%B) : (index) -> !slc.stream<index>
    "slc.for"(%0, %5, %1) ({
    ^bb0(%b: !slc.stream<index>):
      %6 = "slc.mem_stream"(%offsets, %b) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
      %7 = "slc.alu_stream"(%b, %1) {op = "add"} : (!slc.stream<index>, !slc.stream<index>) -> !slc.stream<index>
      %8 = "slc.mem_stream"(%offsets, %7) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
      "slc.callback"() ({
        %9 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
        %10 = "arith.constant"() {value = 0.0} : () -> f32
        "scf.for"(%c0, %D, %c1) ({
        ^bb0(%i: index):
          "memref.store"(%10, %out, %9, %i) : (f32, memref<?x?xf32>, index, index) -> ()
          "scf.yield"() : () -> ()
        }) : (index, index, index) -> ()
        "slc.yield"() : () -> ()
      }) : () -> ()
      %11 = "slc.alu_stream"(%6) {op = "cast"} : (!slc.stream<i32>) -> !slc.stream<index>
      %12 = "slc.alu_stream"(%8) {op = "cast"} : (!slc.stream<i32>) -> !slc.stream<index>
      "slc.for"(%11, %12, %1) ({
      ^bb0(%j: !slc.stream<index>):
        %13 = "slc.mem_stream"(%indices, %j) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
        %14 = "slc.alu_stream"(%13, %2) {op = "clamp"} : (!slc.stream<i32>, !slc.stream<index>) -> !slc.stream<index>
        "slc.for"(%0, %3, %1) ({
        ^bb0(%k: !slc.stream<index>):
          %15 = "slc.mem_stream"(%table, %14, %k) : (memref<?x?xf32>, !slc.stream<index>, !slc.stream<index>) -> !slc.stream<f32>
          "slc.callback"() ({
            %16 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
            %17 = "slc.from_stream"(%k) : (!slc.stream<index>) -> index
            %18 = "slc.from_stream"(%15) : (!slc.stream<f32>) -> f32
            %19 = "memref.load"(%out, %16, %17) : (memref<?x?xf32>, index, index) -> f32
            %20 = "arith.addf"(%19, %18) : (f32, f32) -> f32
            "memref.store"(%20, %out, %16, %17) : (f32, memref<?x?xf32>, index, index) -> ()
            "slc.yield"() : () -> ()
          }) : () -> ()
          "slc.yield"() : () -> ()
        }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
        "slc.yield"() : () -> ()
      }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
      "slc.yield"() : () -> ()
    }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
    "func.return"() : () -> ()
  }
}
