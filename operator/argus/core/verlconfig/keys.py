"""What the keys of verl's configuration are for: the role of each path-valued key.

A key's role decides which paths it may hold after resolution (``check.py``):

* ``code``: a Python file verl imports (the reward function, custom dataset and sampler
  classes, reward-loop and agent-loop modules): a ``.py`` under ``$HOME/code``;
* ``code-config``: a file that names code verl loads (tool, interaction and agent-loop
  configs): under ``$HOME/code``;
* ``data``: data files: under the data roots;
* ``model``: a model, its tokenizer or adapter: a hub id, or under the model roots;
* ``write``: a folder or file the run writes: in the home; a relative one is made
  absolute under the task's job folder (verl's Ray actors run in the raylet's folder, so a
  relative path would land there, shared by every task);
* ``read``: a file or folder verl reads (quantization and debugger configs, a router
  replay, a distributed checkpoint): under the home or the shared roots;
* ``url``: a server verl calls (sandbox fusion): ``http(s)://`` only;
* ``class``: a module or class verl imports by its dotted name (a checkpoint callback, a
  checkpoint engine backend): only verl's own default, since a name is not a place the
  checks can hold to the home;
* ``plain``: a value whose name looks like a path but is not one (``target_modules``):
  reviewed, listed in ``PLAIN``;
* no role: any other string gets the general path checks (no other user's home, no ``..``
  out of a root, no ``~``).

``PATH_LIKE`` is what a key's last segment looks like when it may name a path, a command or
code (``*_path``, ``*_dir``, ``*_file``, ``*_cmd``, ``url``, ``*_module``, ``*_class`` ...):
tests/unit/test_checker_exact.py fails when a supported verl release has such a key that
neither ``ROLES``, the shell rules nor ``PLAIN`` classify, so a release that adds one is
reviewed before Argus supports it.

Keys are dotted paths without list indices; ``*`` stands for one segment. The table names
the keys of every verl version Argus supports (``verl-releases.txt``); a key a version does
not have is simply never met.
"""

from __future__ import annotations

import fnmatch
import functools
import re

CODE = "code"
CODE_CONFIG = "code-config"
DATA = "data"
MODEL = "model"
WRITE = "write"
READ = "read"
URL = "url"
CLASS = "class"

ROLES: dict[str, tuple[str, ...]] = {
    CODE: (
        "custom_reward_function.path", "reward.custom_reward_function.path", "data.custom_cls.path",
        "data.sampler.class_path", "reward.reward_manager.module.path", "reward_model.reward_loop_module_path",
        "actor_rollout_ref.rollout.agent.custom_async_server.path", "trainer.v1.sampler.custom_sampler.path",
        "actor_rollout_ref.rollout.multi_turn.function_tool_path", "data.function_tool_path",
        "data.datagen.path",  # verl 0.6's dynamic dataset: load_extern_type(path, name)
    ),
    CODE_CONFIG: (
        "actor_rollout_ref.rollout.multi_turn.tool_config_path", "actor_rollout_ref.rollout.multi_turn.interaction_config_path",
        "actor_rollout_ref.rollout.agent.agent_loop_config_path", "data.tool_config_path", "data.interaction_config_path",
        # the rollout router's YAML names the router class verl starts
        "*.*.router_config_path", "*.*.*.router_config_path", "*.*.*.*.router_config_path", "*.*.*.*.*.router_config_path",
    ),
    DATA: ("data.train_files", "data.val_files"),
    MODEL: (
        "actor_rollout_ref.model.path", "actor_rollout_ref.model.tokenizer_path", "actor_rollout_ref.model.hf_config_path",
        "critic.model.path", "critic.model.tokenizer_path", "critic.model.hf_config_path", "model.partial_pretrain",
        "model.path", "model.tokenizer_path", "reward_model.model.path", "reward_model.model.input_tokenizer",
        "reward.reward_model.model_path", "data.tokenizer", "distillation.teacher_models.*.model_path", "*.lora_adapter_path",
        "*.*.lora_adapter_path", "*.*.lora.adapter_path", "*.lora.adapter_path", "model.hf_config_path",
    ),
    WRITE: (
        "trainer.default_local_dir", "trainer.rollout_data_dir", "trainer.validation_data_dir",
        "global_profiler.save_path", "*.profiler.save_path", "*.*.profiler.save_path", "ray_kwargs.timeline_json_file",
        "trainer.resume_from_path", "*.*.dump_dir",
        # the Prometheus config verl writes on every node when the rollout's prometheus is on
        "*.*.prometheus.file", "*.*.*.prometheus.file", "*.*.*.*.prometheus.file",
        "profiler.save_path", "trainer.default_hdfs_dir", "*.*.router_replay.record_file", "*.*.*.router_replay.record_file",
        "*.*.skip_dump_dir",
        "data.output_path",  # main_generation (verl 0.6) writes the generated responses there
    ),
    READ: (
        "data.path",  # main_eval's generated responses: often an output of the user's own
        "*.quantization_config_path", "*.*.quantization_config_path", "*.*.*.quantization_config_path",
        "*.*.*.*.quantization_config_path", "*.*.quantization_config_file", "*.*.*.quantization_config_file",
        "*.*.*.*.quantization_config_file", "*.*.precision_debugger.config_path", "*.*.*.precision_debugger.config_path",
        "*.*.*.*.precision_debugger.config_path", "*.*.*.*.*.precision_debugger.config_path",
        "*.*.router_replay.replay_file", "*.*.*.router_replay.replay_file", "*.megatron.dist_checkpointing_path", "*.*.megatron.dist_checkpointing_path",
    ),
    URL: ("sandbox_fusion.url", "*.sandbox_fusion.url"),
    CLASS: ("trainer.checkpoint_callback_class", "*.*.checkpoint_engine.custom_backend_module",
            # verl imports it (importlib.import_module) to register the user's model classes
            "actor_rollout_ref.model.external_lib", "critic.model.external_lib", "reward_model.model.external_lib",
            "model.external_lib"),
}

# Keys whose names look like a path's but hold none (a model's module names), reviewed.
PLAIN: tuple[str, ...] = ("*target_modules", "*exclude_modules", "*recompute_modules")

# Mappings verl reads with .get or hands on as keyword arguments, free-form: keys may be
# added under them with '+' (their values get the general path rules; ray_init its own,
# check.ray_init). Reviewed from verl's example scripts (+actor_rollout_ref.model.
# override_config.*, +ray_kwargs.ray_init.*, megatron's override_transformer_config.*) and
# its config dataclasses (dict fields).
FREE_FORM: tuple[str, ...] = (
    "ray_kwargs.ray_init", "*.override_config", "*.override_transformer_config", "*.override_ddp_config",
    "*.override_mcore_model_config", "*.override_optimizer_config", "*.engine_kwargs", "*.mbridge_config",
    "*.qat", "*.mtp", "*.kw_args", "*.sampler_kwargs", "trainer.v1.sync", "data.apply_chat_template_kwargs",
    "data.mm_processor_kwargs", "actor_rollout_ref.rollout.profiler.tool_config", "reward_model.profiler.tool_config",
    # not in verl's tree, read with .get: the reward function's keyword arguments
    "*custom_reward_function.reward_kwargs", "reward_model.reward_kwargs", "reward.reward_kwargs",
)

# String and null keys whose role the generator cannot tell from a type, reviewed: names
# of a class inside a code file whose path is checked, templates, enum-like choices verl's
# tree leaves null. (A dotted pattern names the whole key; a bare one its last segment.)
REVIEWED_PLAIN: tuple[str, ...] = (
    "custom_chat_template", "chat_template", "ignore_patterns", "name", "class_name", "reward_loop_class_name",
    "reward_loop_source", "reward_manager", "served_model_name", "stages", "steps", "tool", "backend", "quantization",
    "dtype", "warmup_style", "load_format", "ib_device", "activation_observer", "cudagraph_capture_sizes",
    "recompute_granularity", "recompute_method", "recompute_num_layers", "expert_tensor_parallel_size",
    "data_loader_seed", "enable", "max_length", "micro_batch_size", "micro_batch_size_per_gpu", "max_ckpt_to_keep",
    "max_actor_ckpt_to_keep", "max_critic_ckpt_to_keep", "gen_batch_size", "val_batch_size", "prompt_dict_keys",
    "response_dict_keys", "rollout_is", "rollout_rs", "rollout_rs_threshold", "key", "num_cpus",
    "actor_rollout_ref.ref.model",  # null: the reference shares the actor's model
    "ray_kwargs.ray_init.runtime_env.py_executable",
)

# What a key's last segment looks like when it may name a path, a command or code.
PATH_LIKE = re.compile(r"(^|_)(path|paths|dir|file|files|cmd|command|url|uri|hook|module|modules|class|cls|script)$")

_EXACT = {key: role for role, keys in ROLES.items() for key in keys if "*" not in key}
_GLOBS = tuple((key, role) for role, keys in ROLES.items() for key in keys if "*" in key)


@functools.lru_cache(maxsize=65536)
def role_of(key: str) -> str | None:
    """The role of a dotted key (list indices left out), or None. Cached: verl's keys repeat
    in every validation, and the patterns are matched one by one."""
    role = _EXACT.get(key)
    if role is not None:
        return role
    for pattern, r in _GLOBS:
        if pattern.count(".") == key.count(".") and fnmatch.fnmatchcase(key, pattern):
            return r
    return None


# Keys that make Hydra instantiate (or call) Python: allowed only where verl's own base
# config has them, with the same value. Python's logging (Hydra's job_logging) reads
# 'class' and '()' the same way.
INSTANTIATE_KEYS = frozenset(("_target_", "_args_", "_partial_", "_recursive_", "_convert_"))
LOGGING_FACTORY_KEYS = frozenset(("class", "()"))

# The reward function: the key verl 0.9.x's main_ppo reads, and the legacy top-level block
# that version still composes (legacy_reward_impl.yaml) but only its fully-async entry point
# migrates (verl/experimental/reward_loop/reward_loop.py, migrate_legacy_reward_impl).
REWARD_BLOCK = "reward.custom_reward_function"
LEGACY_REWARD_BLOCK = "custom_reward_function"

# Keys verl hands to a shell, past every check: a leaf of this name anywhere (verl's
# profilers run finish_hook_cmd under /bin/sh -c), and every key inside a block whose name
# ends so (Nsight's options are pasted unquoted into the bash -c that starts each Ray
# worker: `env-var=LD_PRELOAD=...` among them). Allowed only as verl's own default.
SHELL_LEAVES = frozenset(("finish_hook_cmd",))
SHELL_BLOCK_SUFFIX = "_nsight_options"
# URL schemes verl hands to a shell: verl copies hdfs:// paths with its hdfs helpers, which
# run `hdfs dfs ...` through os.system with the path pasted in.
SHELL_URL_SCHEMES = ("hdfs://",)

RAY_INIT = "ray_kwargs.ray_init"
RUNTIME_ENV = "ray_kwargs.ray_init.runtime_env"
