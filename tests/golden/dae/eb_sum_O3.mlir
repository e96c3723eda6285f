// The sum embedding bag at -O3 (cf. Ember's tests/eb_slc_O3.mlir and tests/eb_dlc.mlir).
// SLCV: the row loop is an slcv.for<8> whose contiguous vector loads fill a row buffer
// (slcv.buf_stream / slcv.to_buffer); ONE callback per row, after the row loop, walks the
// buffer in chunks of 8 under the tail mask; the output row is a core-side counter %row
// (queue alignment) bumped by an end-of-bag callback, no longer the bag stream.
// Decoupled: three traversal units, the row TU vectorized (vl = 8), the row buffer registered at the
// row TU's end with a token per row, the end-of-bag token on the lookup TU; in the compute
// loop the row case pops the buffer and the end-of-bag case is dlc.increment_var "row".
// The begin-of-bag callback zeroes the output row in chunks of 8 (one masked vector store of
// a zero vector each, the tail masked), as the hand-written program does.
// Both printed levels parse back to the same text.
// RUN: rm -rf %t && ember-xla lower %S/Inputs/eb_sum.hlo -O3 --out %t
// RUN: filecheck %s --input-file %t/cluster0.slcv.mlir
// RUN: filecheck %s --check-prefix=ALIGN --input-file %t/cluster0.slcv.mlir
// RUN: filecheck %s --check-prefix=DLC --input-file %t/cluster0.dlc.mlir
// RUN: ember-xla opt %t/cluster0.slcv.mlir | diff %t/cluster0.slcv.mlir -
// RUN: ember-xla opt %t/cluster0.dlc.mlir | diff %t/cluster0.dlc.mlir -

// CHECK-LABEL: func @offsets_bag(
// CHECK:      %[[DS:[0-9]+]] = "slc.to_stream"(%D)
// CHECK:      %[[LAST:[0-9]+]] = "slc.for"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %c0) ({
// CHECK-NEXT: ^bb0(%b: !slc.stream<index>, %row: index):
// CHECK:        "slc.callback"() ({
// CHECK-NEXT:     %[[VL:[0-9]+]] = "arith.constant"() {value = 8} : () -> index
// CHECK-NEXT:     %[[ZERO:[0-9]+]] = "arith.constant"() {value = 0.0} : () -> vector<8xf32>
// CHECK-NEXT:     "scf.for"(%c0, %D, %[[VL]]) ({
// CHECK-NEXT:     ^bb0(%i: index):
// CHECK-NEXT:       %[[ZM:[0-9]+]] = "slcv.mask"(%i, %c0, %D, %c1)
// CHECK-NEXT:       "vector.maskedstore"(%out, %row, %i, %[[ZM]], %[[ZERO]])
// CHECK-NEXT:       "scf.yield"() : () -> ()
// CHECK:        "slc.for"(
// CHECK-NEXT:   ^bb0(%j: !slc.stream<index>):
// CHECK-NEXT:     %[[IDX:[0-9]+]] = "slc.mem_stream"(%indices, %j)
// CHECK-NEXT:     %[[ROW:[0-9]+]] = "slc.alu_stream"(%[[IDX]], %{{[0-9]+}}) {op = "clamp"}
// CHECK-NEXT:     %[[BUF:[0-9]+]] = "slcv.buf_stream"(%[[DS]]) : (!slc.stream<index>) -> !slc.stream<memref<?xf32>>
// CHECK-NEXT:     "slcv.for"(%{{[0-9]+}}, %[[DS]], %{{[0-9]+}}) ({
// CHECK-NEXT:     ^bb0(%kv: !slc.stream<vector<8xindex>>, %mask: !slc.stream<vector<8xi1>>):
// CHECK-NEXT:       %[[V:[0-9]+]] = "slcv.mem_stream"(%table, %[[ROW]], %kv, %mask) {contiguous = true} : {{.*}} -> !slc.stream<vector<8xf32>>
// CHECK-NEXT:       "slcv.to_buffer"(%[[V]], %[[BUF]], %kv, %mask)
// CHECK-NEXT:       "slcv.yield"() : () -> ()
// CHECK-NEXT:     }) {vl = 8, config = "bcast"}
// CHECK-NEXT:     "slc.callback"() ({
// CHECK:            %[[RB:[0-9]+]] = "slc.from_stream"(%[[BUF]]) : (!slc.stream<memref<?xf32>>) -> memref<?xf32>
// CHECK-NEXT:       "scf.for"(
// CHECK-NEXT:       ^bb0(%c: index):
// CHECK-NEXT:         %[[M:[0-9]+]] = "slcv.mask"(%c,
// CHECK-NEXT:         %[[CH:[0-9]+]] = "slcv.from_buffer"(%[[RB]], %c) : (memref<?xf32>, index) -> vector<8xf32>
// CHECK:              %[[OLD:[0-9]+]] = "vector.maskedload"(%out, %row, %c, %[[M]],
// CHECK-NEXT:         %[[NEW:[0-9]+]] = "arith.addf"(%[[OLD]], %[[CH]]) : (vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:         "vector.maskedstore"(%out, %row, %c, %[[M]], %[[NEW]])
// CHECK-NEXT:         "scf.yield"() : () -> ()
// CHECK-NEXT:       }) : (index, index, index) -> ()
// CHECK-NEXT:       "slc.yield"() : () -> ()
// CHECK-NEXT:     }) : () -> ()
// CHECK-NEXT:     "slc.yield"() : () -> ()
// CHECK-NEXT:   }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
// CHECK-NEXT:   %[[NEXT:[0-9]+]] = "slc.callback"() ({
// CHECK-NEXT:     %[[INC:[0-9]+]] = "arith.addi"(%row, %c1) : (index, index) -> index
// CHECK-NEXT:     "slc.yield"(%[[INC]]) : (index) -> ()
// CHECK-NEXT:   }) : () -> index
// CHECK-NEXT:   "slc.yield"(%[[NEXT]]) : (index) -> ()
// CHECK-NEXT: }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>, index) -> index

// queue alignment: no callback reads the bag stream any more
// ALIGN-NOT: "slc.from_stream"(%b)

// DLC:      "dlc.configure_access_engine"() ({
// DLC-NEXT:   %[[TU0:[0-9]+]] = "dlc.new_tu"(
// DLC:        %[[TU1:[0-9]+]] = "dlc.new_tu"(%[[TU0]],
// DLC-NEXT:   %[[J:[0-9]+]] = "dlc.get_ind_var"(%[[TU1]])
// DLC-NEXT:   "dlc.register_callback"(%[[TU1]]) {event = "begin", id = 0}
// DLC-NEXT:   %[[IDX:[0-9]+]] = "slc.mem_stream"(%indices, %[[J]])
// DLC-NEXT:   %[[ROW:[0-9]+]] = "slc.alu_stream"(%[[IDX]], %{{[0-9]+}}) {op = "clamp"}
// DLC-NEXT:   %[[TU2:[0-9]+]] = "dlc.new_tu"(%[[TU1]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) {vl = 8}
// DLC-NEXT:   %[[K:[0-9]+]] = "dlc.get_ind_var"(%[[TU2]]) : (!dlc.tu) -> !slc.stream<vector<8xindex>>
// DLC-NEXT:   %[[M:[0-9]+]] = "dlc.get_mask"(%[[TU2]]) : (!dlc.tu) -> !slc.stream<vector<8xi1>>
// DLC-NEXT:   %[[V:[0-9]+]] = "slcv.mem_stream"(%table, %[[ROW]], %[[K]], %[[M]]) {contiguous = true}
// DLC-NEXT:   "dlc.register_operand"(%[[TU2]], %[[V]]) {event = "end"}
// DLC-NEXT:   "dlc.register_callback"(%[[TU2]]) {event = "end", id = 1}
// DLC-NEXT:   "dlc.register_callback"(%[[TU1]]) {event = "end", id = 2}
// DLC-NEXT: }) : () -> ()
// DLC-NEXT: %{{[0-9]+}} = "dlc.compute_loop"(%c0) ({
// DLC-NEXT:   %[[R0:[0-9]+]] = "dlc.get_var"() {name = "row"} : () -> index
// DLC:            "vector.maskedstore"(%out, %[[R0]], %i,
// DLC:        "dlc.yield"() : () -> ()
// DLC-NEXT: }, {
// DLC-NEXT:   %[[RB:[0-9]+]] = "dlc.pop_operand"() : () -> memref<?xf32>
// DLC-NEXT:   %[[R1:[0-9]+]] = "dlc.get_var"() {name = "row"} : () -> index
// DLC:            "slcv.from_buffer"(%[[RB]], %c)
// DLC:            "vector.maskedload"(%out, %[[R1]], %c,
// DLC:            "vector.maskedstore"(%out, %[[R1]], %c,
// DLC:        "dlc.yield"() : () -> ()
// DLC-NEXT: }, {
// DLC-NEXT:   "dlc.increment_var"() {name = "row"} : () -> ()
// DLC-NEXT:   "dlc.yield"() : () -> ()
// DLC-NEXT: }) {cases = [0, 1, 2], vars = ["row"]} : (index) -> index
// DLC-NOT: "dlc.pop_operand"() : () -> index
