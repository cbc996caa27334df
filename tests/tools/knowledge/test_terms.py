"""The terms BM25 compares: alert names and identifiers split as operators write them, English
stemmed, CJK as bigrams. Expected lists are written out by hand."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tools.knowledge.terms import terms, word_stems


def test_camel_case_alert_names_split_into_words_and_keep_the_whole_name() -> None:
    assert terms("KubePodCrashLooping") == ["kube", "pod", "crash", "loop", "kubepodcrashlooping"]
    assert terms("etcdGRPCRequestsSlow") == ["etcd", "grpc", "request", "slow", "etcdgrpcrequestsslow"]
    assert terms("NodeRAIDDegraded") == ["node", "raid", "degrad", "noderaiddegraded"]


def test_snake_kebab_and_dotted_names_split_and_meet_their_camel_case_spelling() -> None:
    assert terms("kube_pod_not_ready") == ["kube", "pod", "not", "readi", "kubepodnotready"]
    assert terms("KubePodNotReady")[-1] == "kubepodnotready"
    assert terms("payment-service") == ["payment", "servic", "paymentservice"]
    assert terms("net.netfilter.nf_conntrack_max") == [
        "net",
        "netfilt",
        "nf",
        "conntrack",
        "max",
        "netnetfilternfconntrackmax",
    ]


def test_english_words_are_stemmed_and_function_words_dropped() -> None:
    assert terms("The pods are restarting") == ["pod", "restart"]
    assert terms("certificates expiring") == terms("certificate expires")
    assert terms("not ready, up == 0") == ["not", "readi", "up", "0"]


def test_cjk_runs_become_bigrams_and_full_width_letters_fold() -> None:
    assert terms("支付超时 HikariPool-1") == ["支付", "付超", "超时", "hikari", "pool", "1", "hikaripool1"]
    assert terms("慢") == ["慢"]
    assert terms("ＡＰＩ Server") == ["api", "server"]


def test_glossary_phrases_match_on_word_stems_only() -> None:
    assert word_stems("Persistent Volumes filling, 持久卷") == ["persist", "volum", "fill"]


@given(st.text(max_size=300))
def test_any_text_gives_clean_terms(text: str) -> None:
    for term in terms(text):
        assert term
        assert not any(ch.isspace() for ch in term)
        assert term == term.lower()
