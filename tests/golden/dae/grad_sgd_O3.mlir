// The fused SGD backward of grad_sgd_O0.mlir at -O3. The dense rule's flag pass is a vector
// TU over [0, n_dense) (8 flags cleared per callback; no iteration when the update leaves
// untouched rows unchanged). The scatter phase: the gradient row updates[j, :] is loaded in
// contiguous 8-lane chunks into a row buffer registered at the end of the row TU together with
// the id and its in-range flag (ONE callback per update row); the core walks the buffer in
// chunks of 8 and read-modify-writes grad[id, c:c+8] with masked vector loads and stores. The
// update phase: per id, behind the done flag, the row's fma in chunks of 8 into the table
// updated in place.
// RUN: rm -rf %t %t.p && ember-xla lower %S/Inputs/sgd_step.hlo -O3 --out %t
// RUN: ember-xla lower %S/Inputs/sgd_step.hlo -O3 --emit=program --out %t.p
// RUN: filecheck %s --input-file %t/cluster1.dlc.mlir
// RUN: filecheck %s --check-prefix=PROG --input-file %t.p/cluster1.dae
// RUN: ember-xla opt %t/cluster1.slcv.mlir | diff %t/cluster1.slcv.mlir -
// RUN: ember-xla opt %t/cluster1.dlc.mlir | diff %t/cluster1.dlc.mlir -

// CHECK:      %n_dense = "arith.select"
// CHECK-NEXT: %[[ND:[0-9]+]] = "slc.to_stream"(%n_dense)
// CHECK:      "dlc.configure_access_engine"() ({
// CHECK-NEXT:   %{{[0-9]+}} = "dlc.new_tu"(%{{[0-9]+}}, %[[ND]], %{{[0-9]+}}) {vl = 8}
// CHECK:      "dlc.compute_loop"() ({
// CHECK:        "vector.maskedstore"(%done, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) : (memref<?xi1>, index, vector<8xi1>, vector<8xi1>) -> ()
// CHECK:      "dlc.configure_access_engine"
// CHECK:          "vector.maskedstore"(%grad, %{{[0-9]+}}, %i,
// CHECK:          "memref.store"(%{{[0-9]+}}, %done, %{{[0-9]+}}) : (i1, memref<?xi1>, i32) -> ()
// CHECK:      "dlc.configure_access_engine"
// CHECK:        %[[TU:[0-9]+]] = "dlc.new_tu"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) {vl = 8}
// CHECK:        %[[ROWS:[0-9]+]] = "slcv.mem_stream"(%updates, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) {contiguous = true}
// CHECK-NEXT:   "dlc.register_operand"(%[[TU]], %[[ROWS]]) {event = "end"}
// CHECK-NEXT:   "dlc.register_operand"(%[[TU]], %{{[0-9]+}}) {event = "end"} : (!dlc.tu, !slc.stream<i1>) -> ()
// CHECK-NEXT:   "dlc.register_operand"(%[[TU]], %{{[0-9]+}}) {event = "end"} : (!dlc.tu, !slc.stream<i32>) -> ()
// CHECK-NEXT:   "dlc.register_callback"(%[[TU]]) {event = "end", id = 0}
// CHECK:      "dlc.compute_loop"() ({
// CHECK-NEXT:   %[[BUF:[0-9]+]] = "dlc.pop_operand"() : () -> memref<?xf32>
// CHECK-NEXT:   %[[OK:[0-9]+]] = "dlc.pop_operand"() : () -> i1
// CHECK-NEXT:   %[[ID:[0-9]+]] = "dlc.pop_operand"() : () -> i32
// CHECK:        "scf.for"(%c0, %D,
// CHECK:          %[[CH:[0-9]+]] = "slcv.from_buffer"(%[[BUF]], %c
// CHECK-NEXT:     "scf.if"(%[[OK]]) ({
// CHECK:            %[[OLD:[0-9]+]] = "vector.maskedload"(%grad, %[[ID]], %c
// CHECK-NEXT:       %[[NEW:[0-9]+]] = "arith.addf"(%[[OLD]], %[[CH]]) : (vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:       "vector.maskedstore"(%grad, %[[ID]], %c{{[_0-9]*}}, %{{[0-9]+}}, %[[NEW]])
// CHECK:      "dlc.configure_access_engine"
// CHECK:      "dlc.compute_loop"() ({
// CHECK-NEXT:   %[[OK2:[0-9]+]] = "dlc.pop_operand"() : () -> i1
// CHECK-NEXT:   %[[ID2:[0-9]+]] = "dlc.pop_operand"() : () -> i32
// CHECK-NEXT:   "scf.if"(%[[OK2]]) ({
// CHECK-NEXT:     %[[WAS:[0-9]+]] = "memref.load"(%done, %[[ID2]])
// CHECK:          "memref.store"(%{{[0-9]+}}, %done, %[[ID2]])
// CHECK-NEXT:     %[[S:[0-9]+]] = "memref.load"(%scale) : (memref<f32>) -> f32
// CHECK:          %[[SV:[0-9]+]] = "vector.broadcast"(%[[S]]) : (f32) -> vector<8xf32>
// CHECK:            %[[G:[0-9]+]] = "vector.maskedload"(%grad, %[[ID2]],
// CHECK-NEXT:       %[[T:[0-9]+]] = "vector.maskedload"(%table, %[[ID2]],
// CHECK-NEXT:       %[[Y:[0-9]+]] = "arith.fma"(%[[G]], %[[SV]], %[[T]]) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:       "vector.maskedstore"(%out, %[[ID2]], %{{[_a-z0-9]+}}, %{{[0-9]+}}, %[[Y]])

// The DAE program: the result starts as the table (updated in place).
// PROG: arg 4 out out {{[0-9]+}} f32 2 6 4
// PROG-NEXT: init 4 0
