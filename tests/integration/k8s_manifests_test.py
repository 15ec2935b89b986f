#!/usr/bin/env python3
"""deploy/k8s checked offline (deploy/k8s/check_manifests.py in .venv-k8s):
every overlay (cpu, gpu, tp, lws) renders with `kubectl kustomize`, passes
`kubernetes-validate --strict` (the LeaderWorkerSet: its schema, its pod
templates as PodTemplates) and the project's own rules; and a broken manifest
of each kind is caught — a typo'd field, an unknown kind, a probe on a port
the container lacks, a flag the binary does not take, a grace period shorter
than preStop + drain, a Service selecting nothing; in the LeaderWorkerSet a
typo'd field of its own and of a pod template, a flag the leader's
tandem-worker does not take, a restart policy that would leave a group's MPI
world broken, an unknown kind beside it; an option mpirun does not take in
the tp overlay.

Env: TANDEM_SOURCE_DIR, TANDEM_BIN_DIR (the built binaries, asked for flags).
"""
import os
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.environ["TANDEM_SOURCE_DIR"]
BIN_DIR = os.environ["TANDEM_BIN_DIR"]
CHECK = os.path.join(SOURCE, "deploy/k8s/check_manifests.py")
TIMEOUT = 300


class K8sManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        setup = subprocess.run(["bash", os.path.join(SOURCE, "scripts/setup-k8s-venv.sh")],
                               capture_output=True, text=True, timeout=900)
        if setup.returncode != 0:
            raise AssertionError(f"setup-k8s-venv.sh failed: {setup.stderr[-2000:]}")
        venv_bin = setup.stdout.strip().splitlines()[-1]
        cls.python = os.path.join(venv_bin, "python")
        cls.env = dict(os.environ, PATH=venv_bin + os.pathsep + os.environ["PATH"])
        cls.rendered = cls.render("cpu")
        cls.rendered_lws = cls.render("lws")
        cls.rendered_tp = cls.render("tp")

    @classmethod
    def render(cls, overlay):
        return subprocess.run(
            ["kubectl", "kustomize", os.path.join(SOURCE, "deploy/k8s/overlays", overlay)],
            capture_output=True, text=True, env=cls.env, timeout=TIMEOUT, check=True).stdout

    def check(self, *args):
        return subprocess.run([self.python, CHECK, "--bin-dir", BIN_DIR, *args],
                              capture_output=True, text=True, env=self.env, timeout=TIMEOUT)

    def check_text(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(text)
        try:
            return self.check("--rendered", f.name)
        finally:
            os.unlink(f.name)

    def test_every_overlay_passes(self):
        p = self.check()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("overlays/cpu: ok", p.stdout)
        self.assertIn("overlays/gpu: ok", p.stdout)
        self.assertIn("overlays/lws: ok", p.stdout)
        self.assertIn("overlays/tp: ok", p.stdout)

    def assert_caught(self, broken, *needles):
        self.assertNotIn(broken, (self.rendered, self.rendered_lws, self.rendered_tp),
                         "the mutation did not apply")
        p = self.check_text(broken)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        for needle in needles:
            self.assertIn(needle, p.stderr)

    def test_typo_field(self):
        self.assert_caught(self.rendered.replace("  replicas: 2", "  replcas: 2", 1),
                           "kubernetes-validate")

    def test_unknown_kind(self):
        self.assert_caught(self.rendered + "---\napiVersion: example.com/v1\nkind: Widget\n"
                           "metadata:\n  name: w\n", "kubernetes-validate")

    def test_probe_on_a_missing_port(self):
        self.assert_caught(self.rendered.replace("path: /ready\n            port: http",
                                                 "path: /ready\n            port: htp", 1),
                           "readinessProbe port 'htp'")

    def test_unknown_flag(self):
        self.assert_caught(self.rendered.replace("- --metrics-port=9090",
                                                 "- --metrics-port=9090\n        - --no-such-flag=1",
                                                 1),
                           "tandem-worker does not accept --no-such-flag")

    def test_grace_shorter_than_prestop_and_drain(self):
        self.assert_caught(self.rendered.replace("terminationGracePeriodSeconds: 30",
                                                 "terminationGracePeriodSeconds: 12", 1),
                           "terminationGracePeriodSeconds 12 < preStop 5 s + drain 10 s")

    def test_service_selecting_nothing(self):
        self.assert_caught(
            self.rendered.replace("  selector:\n    app.kubernetes.io/name: tandem-draft\n",
                                  "  selector:\n    app.kubernetes.io/name: tandem-draftz\n", 1),
            "matches no pods")

    def test_lws_typo_field(self):
        self.assert_caught(self.rendered_lws.replace("\n    size: 2\n", "\n    sise: 2\n", 1),
                           "LeaderWorkerSet tandem-worker: spec.leaderWorkerTemplate: Additional "
                           "properties are not allowed ('sise' was unexpected)")

    def test_lws_pod_template_typo_field(self):
        self.assert_caught(self.rendered_lws.replace(
            "          command:\n          - bash\n          - /etc/tandem-mpi/launch-group.sh",
            "          comand:\n          - bash\n          - /etc/tandem-mpi/launch-group.sh", 1),
            "podtemplate/tandem-worker-leadertemplate",
            "template.spec.containers.0: Additional properties are not allowed ('comand'")

    def test_lws_unknown_flag(self):
        self.assert_caught(self.rendered_lws.replace("- --threads=2", "- --threads=2\n"
                                                     "          - --no-such-flag=1", 1),
                           "LeaderWorkerSet tandem-worker leaderTemplate container worker: "
                           "tandem-worker does not accept --no-such-flag")

    def test_lws_restart_policy_keeps_groups_whole(self):
        self.assert_caught(self.rendered_lws.replace("restartPolicy: RecreateGroupOnPodRestart",
                                                     "restartPolicy: None", 1),
                           "restartPolicy None would restart a lost pod alone")

    def test_unknown_kind_beside_lws(self):
        self.assert_caught(self.rendered_lws + "---\napiVersion: example.com/v1\nkind: Widget\n"
                           "metadata:\n  name: w\n", "Couldn't find schema for kind Widget")

    def test_mpirun_unknown_option(self):
        if shutil.which("mpirun", path=self.env["PATH"]) is None:
            self.skipTest("no mpirun to ask for its options")
        self.assert_caught(self.rendered_tp.replace("- --bind-to\n", "- --bind-too\n", 1),
                           "mpirun does not accept --bind-too")


if __name__ == "__main__":
    unittest.main()
