"""Reading an HloModuleProto does not import TensorFlow (3-7 s per CLI call), and TensorFlow
imported afterwards in the same process still works with the same message classes."""

import subprocess
import sys
import textwrap


def test_proto_import_without_tensorflow_then_real_tensorflow(tmp_path):
    script = textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, numpy as np
        from ember_xla.hlo_import.proto import module_from_proto, module_to_proto
        lo = jax.jit(lambda t, i: jnp.take(t, i, axis=0).sum(0)).lower(
            np.ones((10, 4), np.float32), np.zeros(3, np.int32))
        data = lo.compiler_ir("hlo").as_serialized_hlo_module_proto()
        m = module_from_proto(data)
        assert "tensorflow" not in sys.modules, "reading a proto imported TensorFlow"
        out = module_to_proto(m)
        out = out if isinstance(out, bytes) else out.SerializeToString()
        import tensorflow as tf
        from tensorflow.compiler.xla.service import hlo_pb2
        msg = hlo_pb2.HloModuleProto()
        msg.ParseFromString(out)
        assert msg.name and len(msg.computations) >= 1
        assert float(tf.function(lambda x: x * 2)(tf.constant(1.5))) == 3.0
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]
