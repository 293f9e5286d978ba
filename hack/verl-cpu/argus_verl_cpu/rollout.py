"""The ``hf`` rollout for verl 0.9.1 on CPU: ``actor_rollout_ref.rollout.name=hf``.

Stands in for: verl's vLLM rollout (``verl/workers/rollout/vllm_rollout``). verl 0.9.1
generates only through server rollouts (vLLM, SGLang, TensorRT-LLM), none of which runs
without a GPU here, and main_ppo cannot select the ``HFRollout`` class verl still ships. verl
lets a plugin add a rollout, and this one is added the way vLLM's is, in two parts:

- ``HFReplica`` (registered with ``RolloutReplicaRegistry.register``, verl's public API): the
  replica verl's ``LLMServerManager`` starts. It launches one ``HFRolloutServer`` Ray actor on
  the node of the replica's first worker, as ``vLLMReplica`` launches its HTTP server actor.
  The agent loop calls the actor's ``generate`` token in, token out, and gets verl's
  ``TokenOutput`` with the log-probabilities of the sampled tokens (the same temperature-scaled
  distribution the actor's ``compute_log_prob`` uses, so ``training/rollout_probs_diff_*``
  stays near zero).
- ``HFServerAdapter`` (a ``BaseRollout``, in every FSDP worker of the hybrid engine): what
  vLLM's ``ServerAdapter`` is. At every step verl hands it the actor's full weights
  (``update_weights``); the replica's first rank sends them to its server actor, which loads
  them. verl has no register function for adapters, so it goes into verl's own table,
  ``verl.workers.rollout.base._ROLLOUT_REGISTRY[("hf", "async")]``.

Nothing here is fast: one request at a time, no KV cache reuse across requests. It is for a
model of about 100k parameters in the tests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import ray
import torch
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry, TokenOutput

logger = logging.getLogger(__name__)

NAME = "hf"


def server_name(replica_rank: int) -> str:
    return f"argus_hf_rollout_server_{replica_rank}"


def _get(config: Any, key: str, default: Any = None) -> Any:
    value = getattr(config, key, None) if not isinstance(config, dict) else config.get(key)
    if value is None and hasattr(config, "get"):
        value = config.get(key, None)
    return default if value is None else value


class HFRolloutServer:
    """A transformers causal LM that generates token in, token out (a Ray actor)."""

    def __init__(self, config: Any, model_config: Any) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        path = _get(model_config, "local_path") or _get(model_config, "path")
        override = dict(_get(model_config, "override_config", {}) or {})
        attn = override.get("attn_implementation", "sdpa")
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=attn, dtype=torch.float32)
        self.model.eval()
        self.response_length = int(_get(config, "response_length", 64))
        self.max_model_len = _get(config, "max_model_len", None)
        self.global_steps: int | None = None
        self.generator = torch.Generator().manual_seed(0)

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       image_data: Any = None, video_data: Any = None, **kwargs: Any) -> TokenOutput:
        max_new = int(sampling_params.get("max_tokens") or sampling_params.get("max_new_tokens") or self.response_length)
        temperature = float(sampling_params.get("temperature", 1.0) or 0.0)
        top_k = int(sampling_params.get("top_k", -1) or -1)
        eos = self.tokenizer.eos_token_id
        ids = torch.tensor([list(prompt_ids)], dtype=torch.long)
        out_ids: list[int] = []
        log_probs: list[float] = []
        past = None
        with torch.no_grad():
            step_input = ids
            for _ in range(max_new):
                result = self.model(input_ids=step_input, past_key_values=past, use_cache=True)
                past = result.past_key_values
                logits = result.logits[0, -1].float()
                if temperature > 0:
                    scaled = logits / temperature
                    if top_k > 0:
                        kth = torch.topk(scaled, min(top_k, scaled.numel())).values[-1]
                        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
                    probs = torch.softmax(scaled, dim=-1)
                    token = int(torch.multinomial(probs, 1, generator=self.generator).item())
                    logp = torch.log_softmax(logits / temperature, dim=-1)[token]
                else:
                    token = int(torch.argmax(logits).item())
                    logp = torch.log_softmax(logits, dim=-1)[token]
                out_ids.append(token)
                log_probs.append(float(logp))
                if token == eos:
                    break
                step_input = torch.tensor([[token]], dtype=torch.long)
        stop = "completed" if out_ids and out_ids[-1] == eos else "length"
        extra = {"global_steps": self.global_steps}
        return TokenOutput(token_ids=out_ids, log_probs=log_probs, stop_reason=stop, num_preempted=0, extra_fields=extra)

    async def load_weights(self, named: list[tuple[str, torch.Tensor]], global_steps: int | None = None) -> int:
        state = self.model.state_dict()
        loaded = 0
        for name, tensor in named:
            key = name if name in state else name.removeprefix("_fsdp_wrapped_module.")
            if key in state:
                state[key].copy_(tensor.to(state[key].dtype))
                loaded += 1
        if "lm_head.weight" in state and "model.embed_tokens.weight" in dict(named) and \
                getattr(self.model.config, "tie_word_embeddings", False):
            state["lm_head.weight"].copy_(dict(named)["model.embed_tokens.weight"].to(state["lm_head.weight"].dtype))
        self.global_steps = global_steps
        return loaded

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # What verl's replica and trainer call on a server between steps; nothing to do on CPU,
    # where there is no device memory to free and no engine to pause.
    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict[str, Any]:
        return {}

    async def resume_generation(self) -> None:
        return None

    async def wait_for_requests_to_drain(self) -> None:
        return None

    async def start_profile(self, **kwargs: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


class HFReplica(RolloutReplica):
    """One ``HFRolloutServer`` per replica, on its first worker's node."""

    async def launch_servers(self) -> None:
        node_id = await self.workers[0].__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id())
        server = ray.remote(HFRolloutServer).options(
            scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            name=server_name(self.replica_rank) + self.name_suffix,
            num_cpus=0,
            max_concurrency=self.max_concurrency,
        ).remote(self.config, self.model_config)
        self.servers = [server]
        self._server_handle = server
        # The load balancer keys servers by address; this rollout serves no HTTP.
        self._server_address = f"hf-rollout-{self.replica_rank}{self.name_suffix}"

    def rollout_worker_use_gpu(self) -> bool:
        return False


class HFServerAdapter(BaseRollout):
    """In each FSDP worker: sends the actor's full weights to the replica's server actor."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, model_config, device_mesh, *args, **kwargs)
        world = (self.config.tensor_model_parallel_size * self.config.data_parallel_size
                 * self.config.pipeline_model_parallel_size)
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        self.replica_rank, self.leader = rank // world, rank % world == 0
        self._server: Any = None

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None

    async def update_weights(self, weights: Iterable[Any], wire_format: str = "named_tensors", **kwargs: Any) -> None:
        if wire_format != "named_tensors":
            raise NotImplementedError(f"the hf rollout takes full named tensors, not {wire_format!r}")
        named = []
        for name, tensor in weights:  # every rank walks the generator: full_tensor() is collective
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            if self.leader:
                named.append((name, tensor.detach().to("cpu", copy=True)))
        if not self.leader:
            return
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank))
        await self._server.load_weights.remote(named, kwargs.get("global_steps"))


RolloutReplicaRegistry.register(NAME, lambda: HFReplica)
rollout_base._ROLLOUT_REGISTRY[(NAME, "async")] = f"{__name__}.HFServerAdapter"
