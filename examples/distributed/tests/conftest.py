"""The test process has 2 logical CPUs, whichever test touches TensorFlow first.

TensorFlow fixes a process's devices on their first use, and the in-process
`MirroredStrategy` tests need two replicas.
"""

from distributed_testing import two_logical_cpus

two_logical_cpus()
