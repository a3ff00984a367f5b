"""kubectl's kubeconfig files (kctl.apiserver.rest.kubeconfig): loading, merging, contexts, flags, errors."""

from __future__ import annotations

import base64
import os

import pytest

from kctl.apiserver.rest import kubeconfig
from kctl.apiserver.rest.kubeconfig import KubeconfigError, Overrides


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write(path, text: str):
    path.write_text(text)
    return path


ONE = """
apiVersion: v1
kind: Config
current-context: one
clusters:
- name: c1
  cluster:
    server: https://one.example:6443
    certificate-authority-data: {ca}
users:
- name: u1
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: one
  context: {{cluster: c1, user: u1, namespace: team}}
- name: bare
  context: {{cluster: c1, user: u1}}
""".format(ca=b64(b"CA PEM"), cert=b64(b"CERT PEM"), key=b64(b"KEY PEM"))

TWO = """
current-context: two
clusters:
- name: c1
  cluster: {server: "https://shadowed.example"}
- name: c2
  cluster:
    server: https://two.example/
    certificate-authority: certs/ca.crt
    tls-server-name: api.internal
users:
- name: u2
  user: {token: s3cret-token}
- name: u3
  user: {tokenFile: tok}
contexts:
- name: two
  context: {cluster: c2, user: u2}
- name: three
  context: {cluster: c2, user: u3}
"""


def test_current_context_gives_server_trust_credentials_and_namespace(tmp_path):
    """The current context's cluster, user and namespace; *-data fields decoded from base64."""
    conn = kubeconfig.load(str(write(tmp_path / "k1", ONE)))
    assert (conn.server, conn.namespace, conn.context, conn.user) == ("https://one.example:6443", "team", "one", "u1")
    assert (conn.ca_data, conn.cert_data, conn.key_data) == (b"CA PEM", b"CERT PEM", b"KEY PEM")
    assert conn.insecure is False and conn.token is None


@pytest.mark.parametrize("context,namespace", [("one", "team"), ("bare", "default")], ids=["set", "unset"])
def test_context_flag_chooses_the_context_and_its_namespace(tmp_path, context, namespace):
    """--context picks another context; a context without a namespace means "default"."""
    conn = kubeconfig.load(str(write(tmp_path / "k1", ONE)), Overrides(context=context))
    assert conn.namespace == namespace


def test_several_files_merge_first_definition_wins(tmp_path):
    """As kubectl: the first file to define a name or current-context wins; paths are relative to their file."""
    first, second = write(tmp_path / "k1", ONE), write(tmp_path / "k2", TWO)
    merged = kubeconfig.merge([first, second], explicit=True)
    assert merged.current_context == "one"
    assert merged.clusters["c1"][0]["server"] == "https://one.example:6443"
    conn = kubeconfig.resolve(merged, Overrides(context="two"))
    assert conn.server == "https://two.example"
    assert conn.ca_file == str(tmp_path / "certs" / "ca.crt")
    assert conn.tls_server_name == "api.internal" and conn.token == "s3cret-token"


def test_token_file_is_read_relative_to_its_kubeconfig(tmp_path):
    """tokenFile: the token read from a file beside the kubeconfig."""
    (tmp_path / "tok").write_text("from-file\n")
    conn = kubeconfig.load(str(write(tmp_path / "k2", TWO)), Overrides(context="three"))
    assert conn.token == "from-file"


def test_kubeconfig_list_skips_missing_files_but_an_explicit_file_must_exist(tmp_path):
    """$KUBECONFIG entries that do not exist are skipped; a named file that does not is an error."""
    real = write(tmp_path / "k1", ONE)
    env = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing"), str(real)])}
    assert kubeconfig.load(None, environ=env).server == "https://one.example:6443"
    with pytest.raises(KubeconfigError, match="missing: no such file"):
        kubeconfig.load(str(tmp_path / "missing"))


def test_default_file_is_home_kube_config(tmp_path, monkeypatch):
    """With neither --kubeconfig nor $KUBECONFIG, ~/.kube/config is read."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    write(tmp_path / ".kube" / "config", ONE)
    assert kubeconfig.load(None, environ={}).context == "one"


def test_flags_override_the_kubeconfig(tmp_path):
    """--server, --certificate-authority, --client-certificate/--client-key, --token, --insecure-skip-tls-verify."""
    conn = kubeconfig.load(str(write(tmp_path / "k1", ONE)), Overrides(
        server="https://other:7443", certificate_authority="/ca", client_certificate="/c", client_key="/k",
        token="t", insecure_skip_tls_verify=True))
    assert (conn.server, conn.ca_file, conn.ca_data, conn.cert_file, conn.cert_data, conn.key_file, conn.token,
            conn.insecure) == ("https://other:7443", "/ca", None, "/c", None, "/k", "t", True)


def test_server_flag_alone_needs_no_kubeconfig():
    """--server https://... with credential flags and no kubeconfig at all."""
    conn = kubeconfig.resolve(kubeconfig.Merged(), Overrides(server="https://h:6443", token="t"))
    assert (conn.server, conn.token, conn.namespace) == ("https://h:6443", "t", "default")


def test_insecure_skip_tls_verify_only_when_set_explicitly(tmp_path):
    """The default is to verify; `insecure-skip-tls-verify: true` in the file turns it off."""
    assert kubeconfig.load(str(write(tmp_path / "k1", ONE))).insecure is False
    text = ONE.replace("    server: https://one.example:6443", "    server: https://one.example:6443\n"
                       "    insecure-skip-tls-verify: true")
    assert kubeconfig.load(str(write(tmp_path / "k3", text))).insecure is True


BAD = [
    ("not-yaml", "clusters: [", "not valid YAML"),
    ("not-a-mapping", "- a\n- b\n", "must be a mapping"),
    ("clusters-not-list", "clusters: {a: 1}\ncurrent-context: x\n", "clusters must be a list"),
    ("no-name", "clusters:\n- cluster: {server: https://x}\n", r"clusters\[0\].name must be a non-empty string"),
    ("no-context", "clusters: []\n", "no current-context is set"),
    ("unknown-context", "current-context: nope\n", 'context "nope" does not exist'),
    ("unknown-cluster", "current-context: a\ncontexts:\n- name: a\n  context: {cluster: zz}\n",
     'names cluster "zz", which does not exist'),
    ("no-server", "current-context: a\nclusters:\n- name: c\n  cluster: {}\ncontexts:\n- name: a\n"
                  "  context: {cluster: c}\n", 'cluster "c" has no server'),
    ("http", "current-context: a\nclusters:\n- name: c\n  cluster: {server: 'http://h'}\ncontexts:\n- name: a\n"
             "  context: {cluster: c}\n", "is not an https://host"),
    ("bad-base64", "current-context: a\nclusters:\n- name: c\n  cluster: {server: 'https://h', "
                   "certificate-authority-data: '%%%'}\ncontexts:\n- name: a\n  context: {cluster: c}\n",
     'clusters "c": certificate-authority-data is not valid base64'),
    ("exec-plugin", "current-context: a\nclusters:\n- name: c\n  cluster: {server: 'https://h'}\nusers:\n- name: u\n"
                    "  user: {exec: {command: aws}}\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n",
     'users "u": exec credentials are not supported'),
    ("cert-without-key", "current-context: a\nclusters:\n- name: c\n  cluster: {server: 'https://h'}\nusers:\n"
                         "- name: u\n  user: {client-certificate: /c}\ncontexts:\n- name: a\n"
                         "  context: {cluster: c, user: u}\n", "client-certificate is given without client-key"),
    ("insecure-not-bool", "current-context: a\nclusters:\n- name: c\n  cluster: {server: 'https://h', "
                          "insecure-skip-tls-verify: 'yes'}\ncontexts:\n- name: a\n  context: {cluster: c}\n",
     "insecure-skip-tls-verify must be true or false"),
]


@pytest.mark.parametrize("text,message", [(t, m) for _, t, m in BAD], ids=[i for i, _, _ in BAD])
def test_bad_kubeconfigs_are_one_clear_line_naming_file_and_field(tmp_path, text, message):
    """Each unusable kubeconfig is a KubeconfigError naming the file and what is wrong, on one line."""
    path = write(tmp_path / "bad", text)
    with pytest.raises(KubeconfigError, match=message) as caught:
        kubeconfig.load(str(path))
    assert "\n" not in caught.value.message
    assert str(path) in caught.value.message or "flags" in caught.value.message


def test_no_error_quotes_a_token(tmp_path):
    """An error about a user entry names the field, never the token or key data."""
    text = ("current-context: a\nclusters:\n- name: c\n  cluster: {server: 'https://h'}\nusers:\n- name: u\n"
            "  user: {token: TOPSECRET, client-key-data: '%%%'}\ncontexts:\n- name: a\n"
            "  context: {cluster: c, user: u}\n")
    with pytest.raises(KubeconfigError) as caught:
        kubeconfig.load(str(write(tmp_path / "k", text)))
    assert "TOPSECRET" not in caught.value.message and "%%%" not in caught.value.message
