"""verl STAND-IN package: a TEST AND DEMO DOUBLE of the training workload.

This is NOT verl and NOT part of the system under test (the argus operator). Real verl needs
GPUs; this package only imitates verl's command line (Hydra-style overrides), its custom reward
function loading (same messages) and its console progress output, so that the operator can be
tested and demonstrated end to end on machines without accelerators. See
``hack/verl-standin/README.md``.
"""

__version__ = "0.0.0+standin"
STANDIN = True
