"""The composition root: one ``Operator``; it holds everything the process runs on (settings,
the clock, the metrics, the Kubernetes and Ray clients, the task cache, the control loop,
leader election, the webhook's context) and is handed to kopf's handlers as
``memo.operator`` (``handlers.OperatorMemo``); the admission webhook gets only its own
``WebhookContext`` (``memo.webhook``). Nothing lives in module-level state, and nothing
below reads the machine's clock but through the ``clock`` made here; tests build the same
pieces around fakes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..adapters.kube import KubeClusterStore, KubeTaskStore, load_kube_config
from ..adapters.logfiles import LocalLogFiles
from ..adapters.ray import RayJobsClient, client_version, version_note
from ..adapters.secrets import KubeTaskSecrets
from ..adapters.sharedtree import LocalSharedTree
from ..adapters.taskcache import TaskCache
from ..controller.crdcheck import CrdCheck
from ..controller.doctor import Doctor, DoctorLoop
from ..controller.fleet import Connect, LogRouter
from ..controller.loop import ControlLoop
from ..controller.metrics import Metrics
from ..controller.settings import OperatorConfig
from ..controller.view import TaskView, worth_a_look
from ..core.clock import Clock
from ..core.clusters import ClusterConfig
from ..core.crd import built_crds
from ..core.doctor import DoctorSettings
from ..core.inputs import InputPath, warning_lines
from ..core.rayjobs import RayRefused, RayUnreachable
from ..core.times import format_time
from ..core.user import USER_LABEL, user_from_label
from ..core.verlchoice import Composers
from ..core.verlconfig import Composer, ComposeRequest
from ..servers.logapi.settings import LogApiSettings
from ..servers.webhook.context import WebhookContext
from ..servers.webhook.settings import WebhookSettings
from .health import Checks, HealthServer
from .leader import LeaderElection

log = logging.getLogger(__name__)


def cluster_connector(config: OperatorConfig, clock: Clock, metrics: Metrics | None = None) -> Connect:
    """How an ArgusCluster's Ray client is made (``controller.fleet``): its calls counted
    under its name; its token, from its Secret, sent when it has one."""
    def connect(cluster: ClusterConfig, token: Callable[[], str | None]) -> RayJobsClient:
        def on_call(operation: str, outcome: str, seconds: float | None) -> None:
            if metrics is not None:
                metrics.count_ray_call(operation, outcome, seconds, cluster=cluster.name)
        secret = cluster.token_secret
        return RayJobsClient(cluster.address, monotonic=clock.monotonic, on_call=on_call, token=token if secret else None,
                             token_where=f"Secret {config.own_namespace}/{secret.name}" if secret else "")
    return connect


@dataclass
class Operator:
    config: OperatorConfig
    clock: Clock
    metrics: Metrics
    store: KubeTaskStore
    ray: RayJobsClient
    cache: TaskCache[TaskView]
    control_loop: ControlLoop
    leader: LeaderElection | None = None
    webhook: WebhookContext | None = None  # what the admission webhook reads (servers.webhook.context)
    health: HealthServer | None = None
    logs_api: Any = None  # controller.logapi.LogApi with --logs-api
    composers: Composers | None = None  # a composer per verl release Argus has a config tree for (core.verlchoice)
    background: list[asyncio.Task[Any]] = field(default_factory=list)

    @classmethod
    def build(cls, config: OperatorConfig, webhook: WebhookSettings | None = None, kubeconfig: str | None = None,
              logs_api: LogApiSettings | None = None, composers: Composers | None = None, *, clock: Clock,
              metrics: Metrics) -> Operator:
        """Wire the real adapters around the entry point's clock and metrics (which
        ``--metrics-port`` serves). Call from a running event loop (kopf's startup)."""
        load_kube_config(kubeconfig)
        store = KubeTaskStore(now=clock.now)
        ray = RayJobsClient(config.ray_address, monotonic=clock.monotonic, on_call=metrics.count_ray_call, token_file=config.ray_token_file)
        connect = cluster_connector(config, clock, metrics)
        leader = LeaderElection(config.leader_election_namespace, config.leader_election_name, lease_seconds=config.leader_lease_seconds,
                                clock=clock, metrics=metrics) if config.leader_election_namespace else None
        metrics.leader.set(0 if leader else 1)
        cache: TaskCache[TaskView] = TaskCache(TaskView.from_body, config.namespaces, watch_seconds=config.watch_seconds, monotonic=clock.monotonic)
        # The jobs' files where the shared tree is mounted: their exit markers, whatever the
        # progress source, and with --progress-source file their logs.
        files = LocalLogFiles(config.platform.users_root())
        control_loop = ControlLoop(config, ray, store, cache, clock=clock, metrics=metrics,
                                leads=(lambda: leader.is_leader) if leader else (lambda: True), composers=composers, log_files=files,
                                clusters=KubeClusterStore(store), connect=connect, token_namespace=config.own_namespace,
                                shared_tree=LocalSharedTree(), secrets=KubeTaskSecrets(store))

        def on_change(old: TaskView | None, new: TaskView | None) -> None:
            if worth_a_look(old, new):
                control_loop.wake.set()

        cache.on_change = on_change
        metrics.watch_age.set_function(cache.contact_age)
        api = None
        if logs_api is not None:
            from ..adapters.kubeauth import read_front_proxy, subject_access_review  # noqa: PLC0415
            from ..controller.queuesnapshot import queue_settings  # noqa: PLC0415
            from ..servers.logapi.server import LogApi  # noqa: PLC0415
            fleet, base = control_loop.fleet, config.platform
            tree = LocalLogFiles(base.users_root())

            def read_file(path: str) -> str:
                # Only under the users folders of the operator's clusters, never through a link.
                return tree.read_text(path, [base.users_root(), *(c.config.platform(base).users_root() for c in fleet.named.values())])
            api = LogApi(logs_api, LogRouter(control_loop.fleet, cache.views), cache.get, subject_access_review, read_front_proxy, read_file,
                         clock=clock, queue=(cache.views, queue_settings(config)))
        operator = cls(config=config, clock=clock, metrics=metrics, store=store, ray=ray, cache=cache, control_loop=control_loop, leader=leader,
                       logs_api=api, composers=composers)
        if webhook is not None:
            operator.webhook = operator.webhook_context(webhook)
        return operator

    def webhook_context(self, settings: WebhookSettings) -> WebhookContext:
        """What the admission webhook reads of this operator."""
        return WebhookContext(settings=settings, clock=self.clock, reviews=self.metrics.webhook_reviews, platform=self.config.platform,
                              composer=self.composers.default if self.composers is not None else None, namespaces=self.config.namespaces,
                              replicated=bool(self.config.leader_election_namespace),
                              user_of_namespace=self.user_of_namespace, input_warnings=self.input_warnings,
                              composer_for=self.composer_for)

    def composer_for(self, body: Mapping[str, Any]) -> Composer | None:
        """The composer the admission webhook checks a new task with: that of the verl release
        its clusters run, as intake will choose it (core.verlchoice), so that a task for a
        cluster at another release is not refused by the default release's checks."""
        if self.composers is None:
            return None
        return self.composers.of(self.control_loop.scheduler.snapshot.verl_choice(TaskView.from_body(body)).version)

    def checks(self) -> Checks:
        """What /healthz and /readyz answer from (host/health.py)."""
        return Checks(
            synced=self.cache.synced.is_set, contact_age=self.cache.contact_age,
            webhook_listening=self.webhook.listening if self.webhook is not None else None,
            logs_api_listening=(lambda: bool(self.logs_api.listening)) if self.logs_api is not None else None,
            stale_seconds=self.config.watch_stale_seconds,
            tick_age=self.control_loop.tick_age, tick_stuck_seconds=self.config.tick_stuck_seconds,
        )

    async def start(self) -> None:
        """The cache lists and watches in its threads; the loop's first tick waits for the LIST."""
        from ..core.command.hydra import warm_up  # noqa: PLC0415
        if self.config.health_port is not None:
            self.health = HealthServer(self.checks(), self.config.health_host, self.config.health_port)
            await self.health.start()
        self.cache.start()
        if self.logs_api is not None:
            # In the background: it waits for the front proxy's CA (the ConfigMap) if need be.
            self.background.append(asyncio.create_task(self.logs_api.start(), name="argus log API"))
        await asyncio.to_thread(warm_up)  # Hydra's override parser, before the first task needs it
        if self.composers is not None:
            # verl's primary PPO config composed once (about a second), before the first
            # task (a webhook request, say) waits for it; the other releases' on first use.
            await asyncio.to_thread(self.composers.default.compose, ComposeRequest("verl.trainer.main_ppo", (), {}, "/"))
        self.background.append(asyncio.create_task(self.control_loop.run(), name="argus controller"))
        # Every replica, leader or not: a stale CRD is the cluster's state, not the leader's.
        for crd in await asyncio.to_thread(built_crds):
            crd_check = CrdCheck(self.store, crd.schema_hash, self.metrics, kind=crd.kind, name=crd.name)
            self.background.append(asyncio.create_task(crd_check.run(self.config.crd_check_interval), name=f"argus CRD check {crd.name}"))
        self.background.append(asyncio.create_task(self.say_ray_version(), name="argus Ray version"))
        if self.config.doctor_interval > 0:
            self.background.append(asyncio.create_task(self.doctor_loop().run(), name="argus doctor"))
        if self.leader:
            self.background.append(asyncio.create_task(self.leader.run(), name="argus leader election"))

    async def stop(self) -> None:
        for task in self.background:
            task.cancel()
        self.control_loop.logs.close()
        self.cache.stop()
        if self.logs_api is not None:
            await self.logs_api.stop()
        if self.leader:
            await asyncio.to_thread(self.leader.release)
        if self.health:
            await self.health.stop()

    def doctor_loop(self) -> DoctorLoop:
        """argus doctor's checks, run as the leader, on each ArgusCluster (with its client and
        the platform as its jobs see it) or, while there is none, on --ray-address; each
        ArgusCluster's verdict goes to its status. The verdict as an Event on the leader
        Lease when the operator may create Events there: it watches every namespace, or the
        Lease's among them (its RBAC lets it create Events where it watches tasks). Otherwise,
        and without leader election, in the log and the metric only."""
        # Each cluster's verl snapshot must be a release Argus composes and templates with: a
        # cluster that runs another verl fails the doctor (its ArgusCluster's status.doctor,
        # the metric, the Event), rather than its tasks failing at verl's start after the wait.
        expected = self.composers.supported if self.composers is not None else ()
        settings = DoctorSettings(self.config.platform, expected_verl=expected, token_configured=bool(self.config.ray_token_file))
        post = None
        lease_ns = self.config.leader_election_namespace
        if lease_ns and (not self.config.namespaces or lease_ns in self.config.namespaces):
            namespace, name = lease_ns, self.config.leader_election_name

            async def post(type_: str, reason: str, message: str) -> None:
                await self.store.event_on("coordination.k8s.io/v1", "Lease", namespace, name, None, type_, reason, message)
        leader = self.leader
        fleet, base, monotonic = self.control_loop.fleet, self.config.platform, self.clock.monotonic

        async def named() -> list[tuple[str, Doctor]]:
            await fleet.refresh()
            return [(c.name, Doctor(c.ray, DoctorSettings(c.config.platform(base), expected_verl=expected,
                                                          token_configured=c.config.token_secret is not None),
                                    address=c.config.address or f"RayCluster {c.config.ray_cluster_ref}", monotonic=monotonic))
                    for c in fleet.named.values()]
        return DoctorLoop(Doctor(self.ray, settings, address=self.config.ray_address, monotonic=monotonic),
                          self.config.doctor_interval, leads=(lambda: leader.is_leader) if leader else (lambda: True),
                          observe=self.metrics.observe_doctor, post_event=post, monotonic=monotonic,
                          named=named, verdicts=self.control_loop.doctor_verdicts, now=lambda: format_time(self.clock.now()),
                          forget=self.metrics.forget_doctor)

    async def say_ray_version(self, every: float = 30.0) -> None:
        """Log the cluster's Ray version once, as soon as Ray answers: where it stands against
        the tested range, and whether a configured token means anything there."""
        while True:
            try:
                version = await self.ray.cluster_version()
            except (RayUnreachable, RayRefused):
                await asyncio.sleep(every)  # the control loop's conditions say why meanwhile
                continue
            level, message = version_note(self.config.ray_address, version, token=bool(self.config.ray_token_file))
            log.log(level, "%s; the operator's Ray client is %s", message, client_version())
            return

    async def input_warnings(self, found: Sequence[InputPath]) -> list[str]:
        """The admission webhook's warnings for the files a task reads that are not in the
        shared tree (core.inputs): it would wait in the queue for them, not be refused."""
        checks = self.control_loop.input_checks
        return warning_lines(await checks.absent(found)) if checks is not None else []

    async def user_of_namespace(self, namespace: str) -> tuple[str | None, str, str]:
        """(user, reason, message) from the namespace's label, read live (a label changed a
        moment ago counts at once). Raises StoreError when it cannot be read."""
        labels = await self.store.namespace_labels(namespace) if namespace else None
        return user_from_label(namespace, (labels or {}).get(USER_LABEL))
