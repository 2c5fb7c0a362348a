"""Calibrated hit scores: a relevance in [0, 1] that means "this answers the query".

The fused score ranks a query's candidates, but it is normalised over them, so
its top hit is always the best *of this query* — even when nothing stored is
about the query. Callers (agents above all) need to tell a match from noise,
and an agent's loop asks about everything: "continue", "thanks, that works", a
pasted traceback, a question about a person the memory knows but not the
answer. So every hit's ``score`` is the output of a small logistic model over
features that say how well *this* hit answers *this* query:

- ``cosine``: the hit's cosine similarity to the query (the model's own scale);
- ``coverage``: the IDF-weighted share of the query's *content* terms the hit
  holds (:mod:`memoryd.indexer.search.content_words`: very common words of
  each language name no topic and are not counted). A term the corpus never
  saw counts fully against it: names and topics that are not stored are the
  strongest sign of an unanswerable query;
- ``missing``: the IDF-weighted share of the query's content terms that no
  chunk holds at all, the same for every hit;
- ``margin``: how far the hit's cosine stands above the query's own candidates
  (standard deviations above their mean): an answer stands out from the
  chunks that merely share the topic or the speakers, a chat turn's candidates
  are all alike;
- ``lead``: how far the hit's cosine is below the best candidate's, in the same
  units (0 for the best): the top hits are told apart.

A query with no content term at all (``continue``, ``好的``) scores 0: memory
never answers it.

The coefficients are fitted by ``bench/calibrate_scores.py`` on the LoCoMo and
MADial dev sets (positives: each question against its own folder; negatives:
agent-chat prompts, questions about people the folder knows but whose answer
it does not hold, questions from other folders, off-topic questions), every
choice made leave-one-conversation-out, for the default embedding model;
another model needs its own fit (until then, its hits are scored by the
keyword-only coefficients). Scores are then made non-increasing down the
ranking (see :func:`monotone`), so a threshold cuts the list without gaps and
the ranking itself never changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace

__all__ = ["CALIBRATION_VERSION", "Features", "coverage", "features_from", "fitted_for", "monotone",
           "probability", "with_margins"]

CALIBRATION_VERSION = 2
"""Bump when the features or coefficients change: stored thresholds are on this scale."""

# Logistic coefficients (intercept, cosine, coverage, missing, margin, lead) for hits with a cosine,
# and (intercept, coverage, missing) for keyword-only hits. Fitted by bench/calibrate_scores.py on
# the dev sets (multilingual-e5-small); the threshold chosen with them is search.min_score.
HYBRID_COEF: tuple[float, float, float, float, float, float] = (-47.8923, 54.6254, 6.3616, 0.0, 0.3084, 0.0)
KEYWORD_COEF: tuple[float, float, float] = (-2.0501, 6.745, 0.0)
# ``missing`` and ``lead`` fitted to 0: the fit drops a feature whose weight comes out with the wrong sign
# (bench/calibrate_scores.py SIGNS), and the model chosen leave-one-conversation-out has no ``lead``.
MARGIN_CANDIDATES = 10
"""The fewest candidates a margin is measured against: with n candidates no hit stands more than
sqrt(n - 1) standard deviations above their mean, so a small folder's best hit could not earn one."""
UNMEASURED_MARGIN = 1.68
"""The margin of a hit whose query had too few candidates to measure one (a folder of a few chunks):
the mean margin of the fit's training rows (bench/calibrate_scores.py prints it), so that such a hit is
neither helped nor hurt by the feature."""
MIN_SPREAD = 0.01
"""The least cosine spread margins are measured in: a handful of near-equal candidates is no evidence."""


CALIBRATED_MODEL = "multilingual-e5-small-q4"
"""The embedding model the cosine coefficients were fitted for; other models' cosines are not used."""


def fitted_for(model_id: str) -> bool:
    """Whether the cosine coefficients hold for ``model_id`` (the default model at default settings:
    another model, pooling or prefix moves every cosine, so its hits are scored on keywords alone)."""
    return model_id.split(":", 1)[0] == CALIBRATED_MODEL and ";" not in model_id


@dataclass(frozen=True)
class Features:
    """What the calibrated score of one hit is computed from."""

    cosine: float | None  # None: no vector leg (keyword mode, no model) or a model without coefficients
    coverage: float
    missing: float
    content: bool = True  # False: the query has no content term (then nothing answers it)
    margin: float = 0.0  # the cosine's standard deviations above the candidates' mean (with_margins)
    lead: float = 0.0  # ... below the best candidate's (0 for the best; with_margins)

    def to_json(self) -> dict[str, float | bool | None]:
        cos = None if self.cosine is None else round(self.cosine, 6)
        return {"cosine": cos, "coverage": round(self.coverage, 6), "missing": round(self.missing, 6),
                "content": self.content, "margin": round(self.margin, 6), "lead": round(self.lead, 6)}


def probability(f: Features) -> float:
    """The calibrated relevance of one hit, in [0, 1]."""
    if not f.content:
        return 0.0
    if f.cosine is None:
        b0, bcov, bmiss = KEYWORD_COEF
        return _sigmoid(b0 + bcov * f.coverage + bmiss * f.missing)
    b0, bcos, bcov, bmiss, bmargin, blead = HYBRID_COEF
    return _sigmoid(b0 + bcos * f.cosine + bcov * f.coverage + bmiss * f.missing + bmargin * f.margin
                    + blead * f.lead)


def with_margins(feats: Mapping[int, Features], cosines: Mapping[int, float] | None) -> dict[int, Features]:
    """``feats`` with each hit's ``margin`` and ``lead`` measured against the query's candidates
    (``cosines``: every candidate's cosine; fewer than :data:`MARGIN_CANDIDATES`:
    :data:`UNMEASURED_MARGIN`, lead 0; None: no vector leg, unchanged).

    The spread is the candidates' standard deviation, at least :data:`MIN_SPREAD`, so that a few
    near-identical cosines do not turn a 0.001 difference into a large margin."""
    if cosines is None:
        return dict(feats)
    values = list(cosines.values())
    if len(values) < MARGIN_CANDIDATES:
        return {i: f if f.cosine is None else replace(f, margin=UNMEASURED_MARGIN) for i, f in feats.items()}
    mean = sum(values) / len(values)
    sd = max(math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)), MIN_SPREAD)
    best = max(values)
    out = {}
    for i, f in feats.items():
        if f.cosine is None:
            out[i] = f
        else:
            out[i] = replace(f, margin=(f.cosine - mean) / sd, lead=(best - f.cosine) / sd)
    return out


def monotone(scores: Sequence[float], alone: Sequence[bool] = ()) -> list[float]:
    """``scores`` in rank order, made non-increasing: each becomes the best score at or below its rank.

    A hit's score says how likely *this part of the list* holds a relevant passage: when a
    lower-ranked hit is more convincing than the ones above it, those are kept with it. So
    ``min_score`` cuts a prefix of the ranking, and the ranking stays as fused. A hit marked in
    ``alone`` (no evidence of its own: :func:`memoryd.indexer.search.pending.unsupported`) keeps its
    own score and is skipped by the others: a hit with nothing for it is not carried by the hits
    below it, and it carries none of them.
    """
    out = list(scores)
    best = float("-inf")
    for i in range(len(out) - 1, -1, -1):
        if i < len(alone) and alone[i]:
            continue
        best = out[i] = max(out[i], best)
    return out


def coverage(terms: Sequence[str], doc_terms: set[str], weights: Mapping[str, float],
             total: float | None = None) -> float:
    """The ``weights``-weighted share of the query's ``terms`` found in ``doc_terms`` (0 with no terms).

    ``total`` is ``sum(weights[t] for t in terms)`` when the caller has it: a long query's ~120 terms
    are then summed once per search rather than once per hit."""
    total = sum(weights[t] for t in terms) if total is None else total
    if total <= 0:
        return 0.0
    return sum(weights[t] for t in terms if t in doc_terms) / total


def term_weight(df: int, n_docs: int) -> float:
    """IDF that stays positive, also for a term no chunk holds (df 0: the highest weight)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def features_from(
    ids: Sequence[int], terms: Sequence[str], df: Mapping[str, int], n_docs: int,
    stored: Mapping[int, AbstractSet[str]], cosines: Mapping[int, float] | None,
) -> dict[int, Features]:
    """Features of the chunks ``ids`` for a query with keyword ``terms`` (document frequencies ``df``);
    ``stored`` maps each chunk id to its keyword terms, as its backend keeps them (a chunk that vanished
    since it was ranked is missing from it and gets coverage 0).

    ``cosines`` is None when there is no vector leg. A chunk missing from it has no vector
    yet (keyword-first indexing, :mod:`memoryd.indexer.search.pending`) and is scored by the
    keyword-only coefficients: a cosine of 0 would score it near 0 and make ``context`` and
    the MCP tools abstain on a folder that is still being embedded."""
    terms = list(dict.fromkeys(terms))
    weights = {t: term_weight(df.get(t, 0), n_docs) for t in terms}
    total = sum(weights[t] for t in terms)
    missing = 1.0 - coverage(terms, {t for t in terms if df.get(t, 0) > 0}, weights, total) if terms else 0.0
    weighted = list(weights.items())  # the query's order: each hit's sum is the float coverage() returns
    empty: set[str] = set()

    def covered(doc_terms: AbstractSet[str]) -> float:
        return sum([w for t, w in weighted if t in doc_terms]) / total if total > 0 else 0.0

    return {i: Features(None if cosines is None else cosines.get(i), covered(stored.get(i, empty)), missing,
                        content=bool(terms)) for i in ids}


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)
