"""What keeps the CPU driver's cold compile short, checked for behaviour (no timings): the C prelude reads no
system header, yet every C library function a kernel may call is declared."""
import subprocess

from tgfn.dtype import dtypes
from tgfn.renderer.dialects import C
from tgfn.uop.ops import Ops
from tgfn_drivers.cpu import find_c_compiler


def test_the_c_prelude_reads_no_system_header_and_declares_every_function_kernels_call(tmp_path):
  assert "#include" not in C.prelude
  calls = [f"{C.math(op, dt)}(({dt.cname})x)" for op in (Ops.SQRT, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.COS, Ops.TRUNC)
           for dt in (dtypes.float32, dtypes.float64)]
  bits = C.bitcast("(float)x", dtypes.float32, dtypes.int32)  # a bit cast is a memcpy
  src = C.prelude + f"double k(double x) {{ return {' + '.join(calls)} + {bits}; }}\n"
  (tmp_path / "k.c").write_text(src)
  # an undeclared function, or one declared unlike the C library's, is an error here
  proc = subprocess.run([*find_c_compiler(), "-std=c11", "-Werror=implicit-function-declaration", "-Werror=builtin-declaration-mismatch",
                         "-c", str(tmp_path / "k.c"), "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
  assert proc.returncode == 0, proc.stderr
