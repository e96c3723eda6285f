// The fused SGD backward of grad_sgd_O0.mlir at -O3. The scatter phase: the gradient row
// updates[j, :] is loaded in contiguous 8-lane chunks into a row buffer registered at the end
// of the row TU together with the id and its in-range flag (ONE callback per update row);
// the core walks the buffer in chunks of 8 and read-modify-writes grad[id, c:c+8] with masked
// vector loads and stores. The row passes (zeroing, the fma update) are vectorized in the
// core and their row index is a core counter "row" (queue alignment) bumped by a second
// callback per row.
// RUN: rm -rf %t && ember-xla lower %S/Inputs/sgd_step.hlo -O3 --out %t
// RUN: filecheck %s --input-file %t/cluster0.dlc.mlir
// RUN: ember-xla opt %t/cluster0.slcv.mlir | diff %t/cluster0.slcv.mlir -
// RUN: ember-xla opt %t/cluster0.dlc.mlir | diff %t/cluster0.dlc.mlir -

// CHECK:      "dlc.configure_access_engine"
// CHECK:      "dlc.compute_loop"(%c0) ({
// CHECK-NEXT:   %[[ROW:[0-9]+]] = "dlc.get_var"() {name = "row"} : () -> index
// CHECK:        "vector.maskedstore"(%grad, %[[ROW]], %i,
// CHECK:        "dlc.increment_var"() {name = "row"}
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
// CHECK:          %[[CH:[0-9]+]] = "slcv.from_buffer"(%[[BUF]], %c)
// CHECK-NEXT:     "scf.if"(%[[OK]]) ({
// CHECK:            %[[OLD:[0-9]+]] = "vector.maskedload"(%grad, %[[ID]], %c,
// CHECK-NEXT:       %[[NEW:[0-9]+]] = "arith.addf"(%[[OLD]], %[[CH]]) : (vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:       "vector.maskedstore"(%grad, %[[ID]], %c, %{{[0-9]+}}, %[[NEW]])
// CHECK:      "dlc.configure_access_engine"
// CHECK:        %[[S:[0-9]+]] = "memref.load"(%scale) : (memref<f32>) -> f32
// CHECK:        %[[SV:[0-9]+]] = "vector.broadcast"(%[[S]]) : (f32) -> vector<8xf32>
// CHECK:          %[[G:[0-9]+]] = "vector.maskedload"(%grad,
// CHECK-NEXT:     %[[T:[0-9]+]] = "vector.maskedload"(%table,
// CHECK-NEXT:     %[[Y:[0-9]+]] = "arith.fma"(%[[G]], %[[SV]], %[[T]]) : (vector<8xf32>, vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:     "vector.maskedstore"(%out, %{{[0-9]+}}, %i_1, %{{[0-9]+}}, %[[Y]])
