"""The control loop: a level-triggered controller around the pure core.

How a task changes phase: ``loop`` ticks over every task in the cache
(``adapters.taskcache``); what is new about a task (a Ray job's state from ``jobsync``, a
validation verdict from ``intake``, a place from ``scheduler``) goes to
``core.lifecycle.step`` as an observation; the decision (a status and actions) is carried
out by ``reconcile`` and written by the one ``writer``, which patches the status and posts
the Events. ``queuesnapshot`` gathers what the queue's decision needs; ``logfollow`` reads the
running jobs' progress; ``doctor`` runs the cluster checks; ``metrics`` counts. ``ports``
names the protocols of the adapters (``argus.adapters``) that the unit tests replace with
in-memory fakes. The process around the loop lives in ``argus.host``, the webhook and the
log API in ``argus.servers``.
"""
