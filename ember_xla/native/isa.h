// The widest vector clone the kernels may run on this CPU, read once per process.
#ifndef EMBER_XLA_NATIVE_ISA_H_
#define EMBER_XLA_NATIVE_ISA_H_

namespace ember {

// 2: AVX-512F (with AVX2, FMA and F16C), 1: AVX2 with FMA and F16C, 0: baseline (also off
// x86-64). EMBER_XLA_ISA=avx2 or =baseline caps it, to compare the clones on one machine.
int IsaLevel();

}  // namespace ember

#endif  // EMBER_XLA_NATIVE_ISA_H_
