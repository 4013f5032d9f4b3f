"""The inf2 user data run for real, twice and more, against stub `aws`, `docker` and
`systemctl`: it converges, re-runs change nothing, a bad bundle is refused and a new one
is swapped in.

What runs is `render_user_data`'s script, as the instance gets it: the settings header,
the installed units and scripts, then bootstrap.sh (each without its comment lines). The
rendering writes the units and scripts to fixed absolute paths (/usr/local/bin, /etc/systemd/system) that only
stacks/inf2_ec2.py could make configurable, so the test rewrites those paths, and only
those, in the commands around the heredocs (the files' contents are kept). bootstrap.sh's
own paths move through its BOOTSTRAP_* variables. Every path either could write outside
the temporary folder is checked before anything runs: this suite may run as root.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from llm_inference_cdk.inf2.server import HOST_FILES, INSTALLED, installed_text, render_user_data

pytestmark = pytest.mark.skipif(
    any(shutil.which(tool) is None for tool in ("bash", "flock", "sha256sum", "tar")),
    reason="the bootstrap needs bash, flock, sha256sum and tar (all part of the DLAMI)",
)

BOOTSTRAP = HOST_FILES / "bootstrap.sh"
IMAGE_URI = "123456789012.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.29.0-neuronx-sdk2.19.1"
PROBE_REQUEST = '{"text": ["Hello, it\'s me"], "max_new_tokens": 1}'
HEREDOC_END = "INSTALLED_FILE"
SYSTEM_PATH = re.compile(r"(?<![\w.:/-])/(?:usr|etc|opt|var|run|srv|home|root)/")

#: How the bootstrap starts its monitoring: the health check, the Neuron metrics and the
#: shipping of its own log.
MONITORING = "systemctl enable --now djl-serving-health.timer neuron-metrics.service llm-inference-bootstrap-log.timer"
# Each stub appends its name and arguments to $STUB_CALLS, one call a line.
STUBS = {
    "aws": r"""
case "$1 $2" in
  "s3 cp")
    for last; do :; done
    src=${*: -2:1}
    cp "$STUB_S3/${src#s3://*/}" "$last" ;;
  "ecr get-login-password") echo stub-password ;;
  "logs create-log-stream") ;;
  "logs put-log-events")
    [ ! -e "$STUB_STATE/logs-fail" ] || exit 255
    for last; do :; done
    n=$(find "$STUB_STATE" -name 'events-*' | wc -l)
    cp "${last#file://}" "$STUB_STATE/events-$n.json" ;;
  *) echo "aws stub: unexpected $*" >&2; exit 2 ;;
esac
""",
    "docker": r"""
case "$1" in
  info) ;;
  login) cat >"$STUB_STATE/login-stdin" ;;
  image) [ -e "$STUB_STATE/pulled" ] ;;
  pull) [ ! -e "$STUB_STATE/pull-fails" ] && touch "$STUB_STATE/pulled" ;;
  *) echo "docker stub: unexpected $*" >&2; exit 2 ;;
esac
""",
    "systemctl": r"""
case "$1 ${*: -1}" in
  "is-active djl-serving.service") state=$(cat "$STUB_STATE/service" 2>/dev/null || echo inactive)
                                   echo "$state"; [ "$state" = active ] ;;
  "start djl-serving.service"|"restart djl-serving.service") echo active >"$STUB_STATE/service" ;;
esac
""",
    "modprobe": "",
    "modinfo": "echo 2.19.1",
    "curl": "",
}


@dataclass
class Instance:
    """A temporary folder standing in for the instance."""

    tmp: Path
    env: dict[str, str]

    @property
    def root(self) -> Path:
        return self.tmp / "opt" / "llm-inference"

    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def calls_log(self) -> Path:
        return Path(self.env["STUB_CALLS"])

    def publish(self, name: str, files: dict[str, bytes]) -> str:
        """A bundle at s3://bundles/NAME; returns its sha256."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for member, data in files.items():
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        (self.tmp / "s3" / name).write_bytes(buffer.getvalue())
        return hashlib.sha256(buffer.getvalue()).hexdigest()

    def run(self, bundle: str, sha256: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        """Runs the user data; returns the result and the stub calls it made."""
        settings = {
            "BUNDLE_URL": f"s3://bundles/{bundle}",
            "BUNDLE_SHA256": sha256,
            "IMAGE_URI": IMAGE_URI,
            "REGION": "us-east-1",
            "LOG_GROUP": "llm-inference-logs",
            "PORT": "8080",
            "LOAD_TIMEOUT_S": "4500",
            "PUBLISH_ADDRESS": "127.0.0.1",
            "NAMESPACE": "LLMInference/Inf2",
            "PROBE_REQUEST": PROBE_REQUEST,
        }
        script = self.tmp / "user-data.sh"
        script.write_text(redirected(render_user_data(settings), self.tmp / "sysroot"))
        self.calls_log.write_text("")
        result = subprocess.run(["bash", str(script)], env=self.env, capture_output=True, text=True, check=False,
                                timeout=120)  # fmt: skip
        return result, self.calls_log.read_text().splitlines()


def redirected(rendered: str, sysroot: Path) -> str:
    """The rendered user data with the absolute paths of its own commands (not of the
    files it installs, nor of bootstrap.sh) moved under `sysroot`."""
    body = installed_text("bootstrap.sh").split("\n", 1)[1]
    assert rendered.endswith(body), "render_user_data no longer ends with bootstrap.sh (without its comments)"
    prefix, lines, in_heredoc = rendered[: -len(body)], [], False
    for line in prefix.splitlines(keepends=True):
        if in_heredoc:
            in_heredoc = line.rstrip("\n") != HEREDOC_END
        else:
            in_heredoc = line.rstrip().endswith(f"<<'{HEREDOC_END}'")
            line = SYSTEM_PATH.sub(lambda m: f"{sysroot}{m.group(0)}", line)
            assert not SYSTEM_PATH.search(line), line
        lines.append(line)
    assert not in_heredoc
    return "".join(lines) + body


def under(sysroot: Path, target: str) -> str:
    return f"{sysroot}{target}"


@pytest.fixture
def instance(tmp_path: Path) -> Instance:
    bin_dir, state, s3, dev = (tmp_path / name for name in ("bin", "state", "s3", "dev"))
    for folder in (bin_dir, state, s3, dev):
        folder.mkdir()
    for name, body in STUBS.items():
        stub = bin_dir / name
        stub.write_text(f'#!/bin/bash\necho "{name} $*" >>"$STUB_CALLS"\n{body.strip()}\n')
        stub.chmod(0o755)
    for n in range(2):
        (dev / f"neuron{n}").touch()
    sysroot = tmp_path / "sysroot"
    targets = {source: under(sysroot, target) for source, target, _ in INSTALLED}
    env = {
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "STUB_CALLS": str(tmp_path / "calls.log"),
        "STUB_STATE": str(state),
        "STUB_S3": str(s3),
        "BOOTSTRAP_ROOT": str(tmp_path / "opt" / "llm-inference"),
        "BOOTSTRAP_ENV_FILE": str(tmp_path / "etc" / "default" / "djl-serving"),
        "BOOTSTRAP_LOCK_FILE": str(tmp_path / "bootstrap.lock"),
        "BOOTSTRAP_LOG_FILE": str(tmp_path / "bootstrap.log"),
        "BOOTSTRAP_UNIT_FILE": targets["djl-serving.service"],
        "BOOTSTRAP_RUN_SCRIPT": targets["run-container.sh"],
        "BOOTSTRAP_WAIT_SCRIPT": targets["wait-ping.sh"],
        "BOOTSTRAP_NEURON_DEVICES": f"{dev}/neuron*",
        "BOOTSTRAP_RETRY_DELAY_S": "0",
        "BOOTSTRAP_INSTANCE_ID_FILE": str(tmp_path / "cloud-instance-id"),
        "BOOTSTRAP_METRICS_ENV_FILE": str(tmp_path / "etc" / "default" / "llm-inference-metrics"),
        "BOOTSTRAP_METRICS_SCRIPT": targets["neuron_metrics.py"],
        "BOOTSTRAP_METRICS_UNIT_FILE": targets["neuron-metrics.service"],
    }
    # cloud-init's record of the instance id, which the metrics are published under.
    (tmp_path / "cloud-instance-id").write_text("i-0123456789abcdef0\n")
    (tmp_path / "etc" / "default").mkdir(parents=True)
    # Every path bootstrap.sh would default to is moved: none of its writes leaves tmp_path.
    defaults = re.findall(r"\$\{(BOOTSTRAP_\w+):-", BOOTSTRAP.read_text())
    assert defaults and set(defaults) <= env.keys(), set(defaults) - env.keys()
    code = "\n".join(line for line in BOOTSTRAP.read_text().splitlines() if not line.lstrip().startswith("#"))
    assert not SYSTEM_PATH.search(re.sub(r"\$\{BOOTSTRAP_\w+:-[^}]*\}", "", code))
    return Instance(tmp_path, env)


def count(calls: list[str], prefix: str) -> int:
    return sum(call.startswith(prefix) for call in calls)


def untouched_service(calls: list[str]) -> bool:
    """No systemctl call on DJL Serving's unit: the server is left as it is (the monitoring,
    enabled first, and docker may be)."""
    return not [c for c in calls if c.startswith("systemctl") and "djl-serving.service" in c]


V1 = {
    "serving.properties": b"engine=Python\noption.tensor_parallel_degree=8\n",
    "model.py": b"def handle(inputs): ...\n",
}
V2 = {"serving.properties": b"engine=Python\noption.tensor_parallel_degree=4\n", "requirements.txt": b"\n"}
V3 = {"serving.properties": b"engine=Python\noption.tensor_parallel_degree=2\n"}


def contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_first_run_installs_everything_and_a_rerun_changes_nothing(instance: Instance) -> None:
    sha = instance.publish("bundle-v1.tar.gz", V1)
    first, calls = instance.run("bundle-v1.tar.gz", sha)
    assert first.returncode == 0, first.stdout
    download = "aws s3 cp --only-show-errors --region us-east-1 s3://bundles/bundle-v1.tar.gz"
    assert calls.count(f"{download} {instance.root}/bundle.tar.gz.part") == 1
    assert contents(instance.model) == V1
    assert (instance.root / "bundle.sha256").read_text() == f"{sha}\n"
    assert not (instance.root / "bundle.tar.gz.part").exists()
    # The registry login takes the password from `aws ecr get-login-password` on stdin.
    assert "aws ecr get-login-password --region us-east-1" in calls
    assert "docker login --username AWS --password-stdin 123456789012.dkr.ecr.us-east-1.amazonaws.com" in calls
    assert (Path(instance.env["STUB_STATE"]) / "login-stdin").read_text() == "stub-password\n"
    assert calls.count(f"docker pull {IMAGE_URI}") == 1
    env_file = Path(instance.env["BOOTSTRAP_ENV_FILE"]).read_text().splitlines()
    assert f"IMAGE_URI={IMAGE_URI}" in env_file and "LOAD_TIMEOUT_S=4500" in env_file
    assert "PUBLISH_ADDRESS=127.0.0.1" in env_file  # run-container.sh publishes DJL's port there
    assert f"MODEL_DIR={instance.model}" in env_file and f"CACHE_DIR={instance.root / 'neuron-cache'}" in env_file
    assert "systemctl enable --now docker" in calls
    assert "systemctl enable djl-serving.service" in calls
    assert calls.count("systemctl restart --no-block djl-serving.service") == 1
    # The health check's timer and the Neuron metrics, with their settings.
    metrics_env = Path(instance.env["BOOTSTRAP_METRICS_ENV_FILE"]).read_text().splitlines()
    probe = instance.root / "probe-request.json"
    assert metrics_env == ["REGION=us-east-1", "NAMESPACE=LLMInference/Inf2", "INSTANCE_ID=i-0123456789abcdef0",
                           "PORT=8080", f"PROBE_FILE={probe}", "LOG_GROUP=llm-inference-logs",
                           f"BOOTSTRAP_LOG={instance.tmp / 'bootstrap.log'}"]  # fmt: skip
    assert probe.read_text() == PROBE_REQUEST
    assert MONITORING in calls
    assert calls.count("systemctl restart neuron-metrics.service") == 1
    # The unit and its scripts are installed, with their contents, before the bootstrap.
    for source, target, mode in INSTALLED:
        installed = Path(under(instance.tmp / "sysroot", target))
        assert installed.read_text() == installed_text(source)
        assert oct(installed.stat().st_mode & 0o777) == f"0o{mode.lstrip('0')}"
    assert "bootstrap: done" in first.stdout and "2 devices" in first.stdout
    assert "bootstrap: done" in (instance.tmp / "bootstrap.log").read_text()

    # The server compiled its graphs into the cache meanwhile.
    graph = instance.root / "neuron-cache" / "compiler" / "graph.neff"
    graph.parent.mkdir()
    graph.write_bytes(b"compiled")
    model_inode = instance.model.stat().st_ino
    env_mtime = Path(instance.env["BOOTSTRAP_ENV_FILE"]).stat().st_mtime_ns

    second, calls = instance.run("bundle-v1.tar.gz", sha)
    assert second.returncode == 0, second.stdout
    assert count(calls, "aws") == 0, calls  # no download, no registry login
    assert count(calls, "docker pull") == 0 and count(calls, "docker login") == 0
    assert count(calls, "systemctl restart") == 0 and count(calls, "systemctl start") == 0, calls
    assert f"docker image inspect {IMAGE_URI}" in calls
    assert instance.model.stat().st_ino == model_inode and contents(instance.model) == V1
    assert MONITORING in calls  # started if stopped
    assert Path(instance.env["BOOTSTRAP_ENV_FILE"]).stat().st_mtime_ns == env_mtime
    assert graph.read_bytes() == b"compiled"


def test_a_stopped_server_is_started_without_a_restart(instance: Instance) -> None:
    sha = instance.publish("bundle-v1.tar.gz", V1)
    assert instance.run("bundle-v1.tar.gz", sha)[0].returncode == 0
    (Path(instance.env["STUB_STATE"]) / "service").write_text("failed\n")
    result, calls = instance.run("bundle-v1.tar.gz", sha)
    assert result.returncode == 0, result.stdout
    assert "systemctl start --no-block djl-serving.service" in calls and count(calls, "systemctl restart") == 0


def test_a_bundle_with_another_sha256_is_refused_and_the_previous_model_stays(instance: Instance) -> None:
    sha = instance.publish("bundle-v1.tar.gz", V1)
    assert instance.run("bundle-v1.tar.gz", sha)[0].returncode == 0
    tampered = instance.publish("bundle-v2.tar.gz", V2)
    wrong = hashlib.sha256(b"what the stack built").hexdigest()

    result, calls = instance.run("bundle-v2.tar.gz", wrong)
    assert result.returncode != 0
    # bootstrap.sh sends stderr through its log with stdout.
    assert "sha256 mismatch" in result.stdout and wrong in result.stdout and tampered in result.stdout
    assert count(calls, "aws s3 cp") == 1 and untouched_service(calls), calls
    assert contents(instance.model) == V1
    assert (instance.root / "bundle.sha256").read_text() == f"{sha}\n"
    leftovers = {p.name for p in instance.root.iterdir()} - {"model", "neuron-cache", "logs"}
    assert leftovers == {"bundle.tar.gz", "bundle.sha256", "service.fingerprint",
                         "probe-request.json", "monitoring.fingerprint"}  # fmt: skip


def test_a_bundle_that_does_not_extract_leaves_the_previous_model(instance: Instance) -> None:
    sha = instance.publish("bundle-v1.tar.gz", V1)
    assert instance.run("bundle-v1.tar.gz", sha)[0].returncode == 0
    broken = b"not a gzip stream"
    (instance.tmp / "s3" / "broken.tar.gz").write_bytes(broken)

    result, calls = instance.run("broken.tar.gz", hashlib.sha256(broken).hexdigest())
    assert result.returncode != 0
    assert contents(instance.model) == V1 and untouched_service(calls), calls
    # The next run with the good bundle converges again.
    result, calls = instance.run("bundle-v1.tar.gz", sha)
    assert result.returncode == 0, result.stdout
    assert count(calls, "aws s3 cp") == 0 and count(calls, "systemctl restart") == 0
    assert not (instance.root / "model.new").exists()


def test_a_new_bundle_is_swapped_in_and_the_server_restarted(instance: Instance) -> None:
    v1 = instance.publish("bundle-v1.tar.gz", V1)
    assert instance.run("bundle-v1.tar.gz", v1)[0].returncode == 0
    graph = instance.root / "neuron-cache" / "graph.neff"
    graph.write_bytes(b"compiled")

    v2 = instance.publish("bundle-v2.tar.gz", V2)
    result, calls = instance.run("bundle-v2.tar.gz", v2)
    assert result.returncode == 0, result.stdout
    assert f"bootstrap: bundle {v2} installed" in result.stdout
    assert count(calls, "aws s3 cp") == 1
    # Only the new bundle's files: no file of the old one survives the swap, nothing is left half-done.
    assert contents(instance.model) == V2
    assert not any(p.name.startswith("model.") for p in instance.root.iterdir())
    assert not (instance.root / "bundle.tar.gz.part").exists()
    assert (instance.root / "bundle.sha256").read_text() == f"{v2}\n"
    assert calls.count("systemctl restart --no-block djl-serving.service") == 1
    assert count(calls, "docker pull") == 0  # same image: not pulled again
    assert graph.read_bytes() == b"compiled"  # the cache stays; the server decides what to reuse


def test_a_failed_pull_after_a_swap_leaves_the_running_server_its_files(instance: Instance) -> None:
    v1 = instance.publish("bundle-v1.tar.gz", V1)
    assert instance.run("bundle-v1.tar.gz", v1)[0].returncode == 0
    (instance.tmp / "state" / "pulled").unlink()  # the image must be pulled again
    (instance.tmp / "state" / "pull-fails").touch()

    v2 = instance.publish("bundle-v2.tar.gz", V2)
    result, calls = instance.run("bundle-v2.tar.gz", v2)
    assert result.returncode != 0 and count(calls, "docker pull") == 5
    assert count(calls, "systemctl restart") == 0
    # The server still running v1 has it mounted: its files are all still there.
    assert contents(instance.root / "model.old") == V1 and contents(instance.model) == V2

    # Another bundle before any restart: v2 was never served and goes; v1 stays for the server.
    v3 = instance.publish("bundle-v3.tar.gz", V3)
    result, calls = instance.run("bundle-v3.tar.gz", v3)
    assert result.returncode != 0 and count(calls, "systemctl restart") == 0
    assert contents(instance.root / "model.old") == V1 and contents(instance.model) == V3

    (instance.tmp / "state" / "pull-fails").unlink()
    result, calls = instance.run("bundle-v3.tar.gz", v3)
    assert result.returncode == 0, result.stdout
    assert count(calls, "aws s3 cp") == 0 and calls.count("systemctl restart --no-block djl-serving.service") == 1
    assert not any(p.name.startswith("model.") for p in instance.root.iterdir())


def test_no_neuron_device_fails_after_trying_the_driver(instance: Instance) -> None:
    for dev in (instance.tmp / "dev").iterdir():
        dev.unlink()
    sha = instance.publish("bundle-v1.tar.gz", V1)
    result, calls = instance.run("bundle-v1.tar.gz", sha)
    assert result.returncode == 1
    assert "modprobe neuron" in calls and f"no {instance.tmp}/dev/neuron* device" in result.stdout
    assert count(calls, "aws") == 0 and untouched_service(calls), calls
    # The health check is on already: the host reports the server down, and the alarm fires.
    assert MONITORING in calls


def test_an_instance_id_cloud_init_did_not_record_fails_before_anything(instance: Instance) -> None:
    Path(instance.env["BOOTSTRAP_INSTANCE_ID_FILE"]).write_text("")
    sha = instance.publish("bundle-v1.tar.gz", V1)
    result, calls = instance.run("bundle-v1.tar.gz", sha)
    assert result.returncode == 1 and "no instance id in" in result.stdout
    assert count(calls, "aws") == 0 and count(calls, "systemctl") == 0


def test_a_swap_cut_between_its_renames_is_repaired_without_a_download(instance: Instance) -> None:
    sha = instance.publish("bundle-v1.tar.gz", V1)
    assert instance.run("bundle-v1.tar.gz", sha)[0].returncode == 0
    instance.model.rename(instance.root / "model.old")  # killed after the first rename
    (instance.root / "model.new").mkdir()

    result, calls = instance.run("bundle-v1.tar.gz", sha)
    assert result.returncode == 0, result.stdout
    assert contents(instance.model) == V1 and count(calls, "aws") == 0, calls
    assert not any(p.name.startswith("model.") for p in instance.root.iterdir())


# --- the bootstrap's log, shipped to CloudWatch Logs ------------------------------------------------


def ship_log(instance: Instance) -> tuple[int, list[str], list[list[str]]]:
    """Runs the installed llm-inference-ship-log as its timer does, with the settings the
    bootstrap wrote; returns its exit status, the aws calls it made and, for each PutLogEvents
    since the last call, the messages it sent."""
    state = Path(instance.env["STUB_STATE"])
    for old in state.glob("events-*"):
        old.unlink()
    settings = dict(
        line.split("=", 1) for line in Path(instance.env["BOOTSTRAP_METRICS_ENV_FILE"]).read_text().splitlines()
    )
    script = under(instance.tmp / "sysroot", "/usr/local/bin/llm-inference-ship-log")
    instance.calls_log.write_text("")
    result = subprocess.run([script], env={**instance.env, **settings}, capture_output=True, text=True, check=False,
                            timeout=60)  # fmt: skip
    sent = [
        [event["message"] for event in json.loads((state / f"events-{n}.json").read_text())]
        for n in range(len(list(state.glob("events-*"))))
    ]
    calls = [c for c in instance.calls_log.read_text().splitlines() if c.startswith("aws")]
    return result.returncode, calls, sent


def test_a_failed_bootstraps_reason_reaches_the_log_group(instance: Instance) -> None:
    """The dashboard's log widget reads the server's log group: the bootstrap's own log goes
    there too (stream bootstrap-<instance id>), from a timer the bootstrap starts before any step
    that can fail."""
    sha = instance.publish("bundle-v1.tar.gz", V1)
    (instance.tmp / "s3" / "bundle-v1.tar.gz").write_bytes(b"tampered")
    result, calls = instance.run("bundle-v1.tar.gz", sha)
    assert result.returncode == 1 and MONITORING in calls
    status, calls, sent = ship_log(instance)
    assert status == 0, calls
    stream = "--region us-east-1 --log-group-name llm-inference-logs --log-stream-name bootstrap-i-0123456789abcdef0"
    assert calls[0] == f"aws logs create-log-stream {stream}" and calls[1].startswith(
        f"aws logs put-log-events {stream}"
    )
    (messages,) = sent
    assert messages[0].startswith("bootstrap: start ") and "sha256 mismatch" in messages[-1], messages
    # Sent once: a run with nothing new calls nothing.
    assert ship_log(instance)[1:] == ([], [])


def test_the_log_is_sent_whole_lines_once_and_again_after_a_failure(instance: Instance) -> None:
    sha = instance.publish("bundle-v1.tar.gz", V1)
    assert instance.run("bundle-v1.tar.gz", sha)[0].returncode == 0
    assert ship_log(instance)[0] == 0
    log = instance.tmp / "bootstrap.log"
    with log.open("a") as f:
        f.write("bootstrap: a line\n\nbootstrap: half a li")
    # The blank line is skipped, the unfinished one waits.
    assert ship_log(instance)[2] == [["bootstrap: a line"]]
    with log.open("a") as f:
        f.write("ne\n")
    (instance.tmp / "state" / "logs-fail").touch()
    status, _, sent = ship_log(instance)
    assert status != 0 and sent == []
    (instance.tmp / "state" / "logs-fail").unlink()
    assert ship_log(instance)[2] == [["bootstrap: half a line"]]
    # A log replaced by a shorter one (a new instance volume, an operator) is sent from its start.
    log.write_text("bootstrap: start again\n")
    assert ship_log(instance)[2] == [["bootstrap: start again"]]
