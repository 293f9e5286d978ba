"""The process host: everything that makes the operator a process, around the control loop.

``main`` (``argus-operator``: flags -> settings) builds the composition root ``operator``
(one ``Operator`` holds every dependency: the clock, the metrics, the Kubernetes and Ray
clients, the task cache, the control loop, the servers) and hands it to kopf
(``handlers``), which hosts the process and the admission webhook. ``leader`` elects the one
replica that runs the loop; ``health`` answers the kubelet's probes; ``release`` is the
uninstall hook (``--release-finalizers``).
"""
