"""Start-up hook of the "last bits moved" test setting (course_tools/last_bits.py): Python imports this file in
every process whose PYTHONPATH names this folder, the notebook kernels included."""

from course_tools.last_bits import install_when_torch_loads

install_when_torch_loads()
