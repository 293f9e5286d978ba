"""The operator: a level-triggered controller around the pure core.

Flow: ``cache`` (list + watch of ArgusTasks) -> ``reconciler`` (each tick: ``jobsync`` reads
the Ray jobs that are due, new tasks are validated, the queue admits) -> ``core.lifecycle``
decides each task's status and actions -> ``writer`` patches the status and posts Events.
``operator`` is the composition root (one ``Operator`` object holds every dependency);
``handlers`` hands it to kopf, which hosts the process and the admission ``webhook``.
``ports`` names the protocols of the adapters (``argus.adapters``) that tests replace with fakes.
"""
