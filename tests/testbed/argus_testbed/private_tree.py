"""A /private-like tree for tests and the demo: shared datasets, user homes with data, code
and a reward function, laid out under a temp dir that the operator uses as its root.
Also the login profile for Ray nodes (jobs run under ``bash -lc``, which resets PATH)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from .controlplane import repo_root
from .verl import standin_snapshot

# The verl code the tests and the demo run: the stand-in with the default verl release's real
# config tree copied in (argus_testbed.verl.standin_snapshot), in the shared cache.
STANDIN = standin_snapshot()
REWARD = repo_root() / "examples" / "data" / "reward.py"


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def gsm8k_rows(n: int = 4) -> list[dict[str, Any]]:
    return [{
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": f"What is {i} + {i}? Answer after ####."}],
        "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
        "extra_info": {"index": i, "split": "train"},
    } for i in range(n)]


def make_private_tree(root: Path, users: tuple[str, ...] = ("alice", "bob")) -> Path:
    for user in users:
        for sub in ("datasets", "models", "code", "jobs", "checkpoints"):
            (root / "users" / user / sub).mkdir(parents=True, exist_ok=True)
    (root / "hf").mkdir(parents=True, exist_ok=True)
    (root / "common" / "models").mkdir(parents=True, exist_ok=True)
    write_rows(root / "datasets" / "gsm8k" / "train.parquet", gsm8k_rows())
    write_rows(root / "datasets" / "gsm8k" / "test.parquet", gsm8k_rows(2))
    for user in users:
        write_rows(root / "users" / user / "datasets" / "gsm8k" / "test.parquet", gsm8k_rows(2))
        write_rows(root / "users" / user / "datasets" / "sft" / "train.parquet",
                   [{"prompt": "2+2?", "response": "4"}, {"prompt": "3+3?", "response": "6"}])
        write_rows(root / "users" / user / "datasets" / "sft" / "test.parquet", [{"prompt": "1+1?", "response": "2"}])
        shutil.copy(REWARD, root / "users" / user / "code" / "reward.py")
    if "bob" in users:
        (root / "users" / "bob" / "datasets" / "secret.parquet").write_bytes(b"bob's secret")
    return root


def login_home(home: Path, python_dir: Path | None = None, *, standin: bool = True) -> Path:
    """A HOME for the Ray nodes whose login profile puts the training Python (``python_dir``,
    default this venv's) and, with ``standin``, the stand-in torchrun back on PATH, as a
    worker image's profile would. The training Python needs pyarrow (the stand-in reads
    parquet). For real verl (``standin=False``) torchrun is the training Python's own."""
    home.mkdir(parents=True, exist_ok=True)
    python_bin = str(python_dir or Path(sys.executable).parent)
    path = f"{STANDIN / 'bin'}:{python_bin}" if standin else python_bin
    (home / ".bash_profile").write_text(f'export PATH="{path}:$PATH"\n')
    return home
