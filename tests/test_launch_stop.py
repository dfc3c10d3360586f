"""A stopped caller stops its training run: Ctrl-C, or SIGTERM to the ``convohub`` command, ends the
``accelerate launch`` subprocess and the trainer it started (a process group of their own), instead of leaving
an orphaned trainer writing into the work folder that a resumed release trains into again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

#: The caller. It sets its Ctrl-C handler itself: the test run may ignore SIGINT (a shell without job control starts
#: background commands so), an ignored signal stays ignored across exec, and Python then installs no handler.
DRIVER = """
import signal
import sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from pathlib import Path
from convohub.training.launch import exit_on_sigterm
from convohub.training.launch import run_script
exit_on_sigterm()
run_script(Path(sys.argv[1]), Path(sys.argv[2]), ["--pid", sys.argv[3]])
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads process states from /proc")
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, None)])
def test_a_stopped_caller_stops_the_launcher_and_its_trainer(tmp_path: Path, signum: int, code: int | None) -> None:
    script = tmp_path / "train_forever.py"
    script.write_text("import os, sys, time\n"
                      "args = sys.argv[1:]\n"
                      "open(args[args.index('--pid') + 1], 'w').write(str(os.getpid()))\n"
                      "time.sleep(300)\n")
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text("seed: 0\n")
    pid_file = tmp_path / "trainer.pid"
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(script), str(recipe), str(pid_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (pid_file.is_file() and pid_file.read_text()):
            assert driver.poll() is None, driver.stderr.read() if driver.stderr else ""
            assert time.monotonic() < deadline, "the trainer never started"
            time.sleep(0.2)
        trainer = int(pid_file.read_text())
        assert _alive(trainer)
        driver.send_signal(signum)
        returncode = driver.wait(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
            if pid_file.is_file() and pid_file.read_text():  # the launcher and trainer the killed caller left
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(os.getpgid(int(pid_file.read_text())), signal.SIGKILL)
    assert returncode != 0 and (code is None or returncode == code)
    deadline = time.monotonic() + 15
    while _alive(trainer) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(trainer):
        os.kill(trainer, signal.SIGKILL)
        pytest.fail(f"trainer {trainer} outlived its caller")
