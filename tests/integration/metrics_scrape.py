"""Reads a Prometheus /metrics page with prometheus_client's parser, for the
integration tests of the coordinator's and the processes' metrics."""
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def samples(text):
    """{(sample name, frozenset of labels without model_name): value}."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = frozenset((k, v) for k, v in s.labels.items() if k != "model_name")
            out[(s.name, labels)] = s.value
    return out


def scrape(url, timeout=30):
    """samples() of GET `url` (which must answer 200)."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return samples(r.read().decode())
