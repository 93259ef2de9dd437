"""The embedded default corpus: an infinite language sampled from a random, seeded PCFG.

Hierarchical syntax (nested nonterminals), Dyck-style brackets and head-dependent agreement
give structure spanning many tokens, so deeper and wider models keep finding more to predict;
this is the synthetic stand-in for the language data of Kaplan et al. 2020 (docs/science.md §2).

Grammar construction, drawn once from `default_rng([seed, tag])` (numpy PCG64), V = vocab_size:
- Vocabulary: token 0 ends a sentence (EOS); then `min(4, (V-1)//12)` bracket pairs (opening
  tokens, then the matching closing tokens); the W remaining tokens are words, ranked by a
  Zipf prior 1/rank.
- `n_nonterminals` nonterminals; A_0 is the start symbol S. Each A_i also names a word
  category whose lexicon is `W//6 + 2` words drawn without replacement by the Zipf prior and
  weighted 1/k^2 in draw order; a preterminal slot P_i emits one word of lexicon i.
- S has 2-4 rules of 2..branching nonterminals A_1.., so a sentence has parts. Every other A_i
  has a lexical rule A_i -> P_i (probability P_LEXICAL) and 1-3 further rules. With
  probability P_PAIRED such a rule is paired, `OPEN X_1..X_m CLOSE` (m in 1..branching
  nonterminals; the delimiters are not counted in m): a bracket pair whose closing token
  matches the opening one (Dyck nesting), or an agreement pair: a head word h from a
  category's lexicon and, after the whole inner span, its dependent `agree[h]` (a fixed
  random permutation of the words). Otherwise it is plain, m in 1..branching symbols, each a
  nonterminal (P_NONTERMINAL), a fixed function word drawn by the Zipf prior (P_LITERAL), or a
  preterminal of a random category. Rule weights are squared integers 1..9, normalised over
  the non-lexical mass: skewed, so that context predicts which rule was taken.
- Depth bound: sentences are expanded level by level from S; at level `pcfg_depth - 1` every
  nonterminal takes its lexical rule (S emits P_0), so a tree has <= pcfg_depth levels.
- `expected_stats()` gives the exact mean sentence length and derivation entropy by dynamic
  programming; derivation entropy per token bounds the entropy rate from above.
Sampling and construction use only integer draws, uniform doubles and IEEE + - * / with fixed
summation order, never libm-dependent samplers (gamma, Dirichlet), Python hash() or set
order: the same seed gives bit-identical grammars and streams on every machine (numpy's
Generator streams are stable within a numpy version). Expansion is vectorised over all
sentences of a batch at once (one numpy pass per tree level), so every batch is fresh.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

from depthwidth.config import DataConfig
from depthwidth.data.base import _SPLIT_ID, DataError, DataSource, entropy_of_counts

_GRAMMAR_TAG = 0x70636667  # "pcfg": keeps grammar seeds apart from batch seeds
_ENTROPY_TAG = 0x656E7472  # "entr": the held-aside sample behind unigram_entropy()
_ENTROPY_TOKENS = 1 << 19
P_LEXICAL = 0.2
P_PAIRED = 0.3
P_NONTERMINAL = 0.6
P_LITERAL = 0.2
LEXICON_EXPONENT = 2


def _zipf_cdf(n: int, exponent: int = 1) -> np.ndarray:
    """Cumulative Zipf weights 1/rank^exponent over ranks 0..n-1; the last entry is exactly 1.0.

    Integer exponents keep this to IEEE * and /, bit-identical on every machine.
    """
    rank = np.arange(1, n + 1, dtype=np.float64)
    w = np.ones(n)
    for _ in range(exponent):
        w = w * rank
    cdf = np.cumsum(1.0 / w)  # cumsum is strictly sequential; sum() may pair differently
    cdf /= cdf[-1]
    cdf[-1] = 1.0
    return cdf


def _draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws for rows of padded cumulative tables (padding = 1.0, never chosen).

    `cdf` is (k,) or (n, k) already gathered per draw; u in [0, 1) never reaches 1.0, so the
    result is always a real entry even when float sums leave the last cdf below 1.
    """
    return (u[:, None] >= cdf).sum(axis=-1) if cdf.ndim == 2 else np.searchsorted(cdf, u, "right")


class Grammar:
    """A random PCFG as flat numpy tables, ready for vectorised level-by-level expansion."""

    def __init__(self, vocab_size: int, depth: int, branching: int, n_nonterminals: int, seed: int):
        rng = np.random.default_rng([seed, _GRAMMAR_TAG])
        V, n, b = vocab_size, n_nonterminals, branching
        self.vocab_size, self.depth, self.n, self.branching = V, depth, n, b
        self.n_brackets = min(4, (V - 1) // 12)
        self.first_word = 1 + 2 * self.n_brackets
        self.n_words = W = V - self.first_word
        # Symbol codes during expansion: tokens < V, then nonterminals A_i, preterminal slots
        # P_i, agreement heads H_i and tails T_i (category i), and the two bracket delimiters.
        self.NT, self.PT, self.AGH, self.AGT = V, V + n, V + 2 * n, V + 3 * n
        self.BRO, self.BRC = V + 4 * n, V + 4 * n + 1

        self.word_cdf = _zipf_cdf(W)
        self.agree = self.first_word + rng.permutation(W)  # head word -> its dependent word
        K = self.lexicon_size = min(W, W // 6 + 2)
        word_p = np.diff(self.word_cdf, prepend=0.0)
        self.lex_tok = np.stack(
            [self.first_word + rng.choice(W, size=K, replace=False, p=word_p) for _ in range(n)]
        )
        self.lex_cdf = np.broadcast_to(_zipf_cdf(K, LEXICON_EXPONENT), (n, K)).copy()

        rules = [[self._start_rule(rng) for _ in range(int(rng.integers(2, 5)))]]
        probs = [_weights(rng, len(rules[0]))]
        for i in range(1, n):
            extra = [self._rule(rng) for _ in range(int(rng.integers(1, 4)))]
            rules.append([[self.PT + i]] + extra)
            probs.append(np.concatenate([[P_LEXICAL], (1.0 - P_LEXICAL) * _weights(rng, len(extra))]))
        # At the depth bound every A_i takes its lexical rule; S (which has none) emits P_0.
        rules.append([[self.PT]])
        probs.append(np.ones(1))

        R, L = max(len(r) for r in rules), b + 2
        self.cdf = np.ones((n, R))
        self.rule_off = np.zeros(n + 1, dtype=np.int64)
        self.rhs = np.zeros((sum(len(r) for r in rules), L), dtype=np.int64)
        self.rhs_len = np.zeros(len(self.rhs), dtype=np.int64)
        self.rule_p = np.zeros(len(self.rhs))
        g = 0
        for i, (rs, p) in enumerate(zip(rules, probs)):
            if i < n:
                self.cdf[i, : len(rs)] = np.cumsum(p)
                self.cdf[i, len(rs) - 1 :] = 1.0
            self.rule_off[i] = g
            for r, pr in zip(rs, p):
                self.rhs[g, : len(r)], self.rhs_len[g], self.rule_p[g] = r, len(r), pr
                g += 1
        self.lex_rule = self.rule_off[:n].copy()
        self.lex_rule[0] = self.rule_off[n]
        self.n_rules = len(self.rhs)
        self.mean_len, derivation_entropy = self.expected_stats()
        self.entropy_bound = derivation_entropy / self.mean_len

    def _start_rule(self, rng: np.random.Generator) -> list[int]:
        m = int(rng.integers(2, self.branching + 1))
        if self.n == 1:  # a single nonterminal: sentences are strings of S's words
            return [self.PT] * m
        return [self.NT + int(rng.integers(1, self.n)) for _ in range(m)]

    def _rule(self, rng: np.random.Generator) -> list[int]:
        m = int(rng.integers(1, self.branching + 1))
        if self.n > 1 and rng.random() < P_PAIRED:
            inner = [self.NT + int(rng.integers(1, self.n)) for _ in range(m)]
            if self.n_brackets and rng.random() < 0.5:
                return [self.BRO] + inner + [self.BRC]
            c = int(rng.integers(0, self.n))
            return [self.AGH + c] + inner + [self.AGT + c]
        rhs = []
        for _ in range(m):
            u = rng.random()
            if self.n > 1 and u < P_NONTERMINAL:
                rhs.append(self.NT + int(rng.integers(1, self.n)))
            elif u < P_NONTERMINAL + P_LITERAL:  # a fixed word: a function word of this rule
                rhs.append(self.first_word + int(_draw(self.word_cdf, rng.random(1))[0]))
            else:
                rhs.append(self.PT + int(rng.integers(0, self.n)))
        return rhs

    def sentences(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """m sentences, each followed by EOS (token 0), as one flat int64 token array."""
        seq = np.tile(np.array([self.NT, 0], dtype=np.int64), m)
        for level in range(self.depth):
            is_nt = (seq >= self.NT) & (seq < self.PT)
            pos = np.flatnonzero(is_nt)
            if len(pos) == 0:
                break
            A = seq[pos] - self.NT
            if level == self.depth - 1:
                rule = self.lex_rule[A]
            else:
                rule = self.rule_off[A] + _draw(self.cdf[A], rng.random(len(A)))
            n_out = self.rhs_len[rule]
            lens = np.ones(len(seq), dtype=np.int64)
            lens[pos] = n_out
            new = np.repeat(seq, lens)
            mask = np.repeat(is_nt, lens)
            # `inst`: the rule instance each new symbol comes from; `within`: its RHS slot.
            inst = np.repeat(np.arange(len(A)), n_out)
            within = np.arange(len(inst)) - (np.cumsum(n_out) - n_out)[inst]
            sym = self.rhs[rule[inst], within]
            if (sym >= self.AGH).any():
                sym = self._resolve_pairs(rng, sym, inst, len(A))
            new[mask] = sym
            seq = new
        slots = np.flatnonzero(seq >= self.PT)
        c = seq[slots] - self.PT
        seq[slots] = self.lex_tok[c, _draw(self.lex_cdf[c], rng.random(len(c)))]
        return seq

    def _resolve_pairs(self, rng, sym, inst, n_inst) -> np.ndarray:
        """Delimiter codes -> tokens; both ends of one rule instance share one draw."""
        sym = sym.copy()
        idx = np.flatnonzero(sym >= self.AGH)
        s, u = sym[idx], rng.random(n_inst)[inst[idx]]
        agree = s < self.BRO
        c = np.where(s < self.AGT, s - self.AGH, s - self.AGT)[agree]
        word = self.lex_tok[c, _draw(self.lex_cdf[c], u[agree])]
        tail = s[agree] >= self.AGT
        word[tail] = self.agree[word[tail] - self.first_word]
        s[agree] = word
        if self.n_brackets:
            kind = (u[~agree] * self.n_brackets).astype(np.int64)
            s[~agree] = 1 + kind + np.where(s[~agree] == self.BRC, self.n_brackets, 0)
        sym[idx] = s
        return sym

    def stream(self, rng: np.random.Generator, n_tokens: int) -> np.ndarray:
        """At least n_tokens tokens of consecutive sentences."""
        parts, total = [], 0
        while total < n_tokens:
            m = int((n_tokens - total) / self.mean_len * 1.2) + 1
            parts.append(self.sentences(rng, m))
            total += len(parts[-1])
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def expected_stats(self) -> tuple[float, float]:
        """(expected sentence length with its EOS, expected derivation entropy in nats).

        Computed exactly by dynamic programming over levels from the rule tables. Their
        ratio, the derivation entropy per token, bounds the stream's entropy rate from above
        (a sentence is a function of its derivation): the loss of a perfect model that sees
        the whole past is at most this.
        """
        lex_h = np.array([_entropy(np.diff(c, prepend=0.0)) for c in self.lex_cdf])
        n_len, n_ent = np.ones(self.n), lex_h.copy()  # at the bound: one word, own lexicon
        for _ in range(self.depth - 1):
            L2, E2 = np.zeros(self.n), np.zeros(self.n)
            for i in range(self.n):
                lo, hi = self.rule_off[i], self.rule_off[i + 1]
                E2[i] = _entropy(self.rule_p[lo:hi])
                for g in range(lo, hi):
                    ln, en = self._rhs_stats(g, n_len, n_ent, lex_h)
                    L2[i] += self.rule_p[g] * ln
                    E2[i] += self.rule_p[g] * en
            n_len, n_ent = L2, E2
        return float(n_len[0] + 1.0), float(n_ent[0])

    def _rhs_stats(self, g, n_len, n_ent, lex_h) -> tuple[float, float]:
        ln = en = 0.0
        for s in self.rhs[g, : self.rhs_len[g]]:
            if s < self.NT:
                ln += 1.0
            elif s < self.PT:
                ln += n_len[s - self.NT]
                en += n_ent[s - self.NT]
            elif s < self.AGH:
                ln += 1.0
                en += lex_h[s - self.PT]
            elif s < self.AGT:  # the head's draw; its tail is then determined
                ln += 1.0
                en += lex_h[s - self.AGH]
            elif s < self.BRO:
                ln += 1.0
            else:
                ln += 1.0
                en += np.log(self.n_brackets) if s == self.BRO else 0.0
        return ln, en


def _weights(rng: np.random.Generator, k: int) -> np.ndarray:
    """Rule probabilities from squared integer weights 1..9 (skewed, portable)."""
    w = rng.integers(1, 10, size=k) ** 2  # integers: the normaliser is exact
    return w / float(w.sum())


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


@functools.lru_cache(maxsize=16)
def _grammar(V: int, depth: int, b: int, n: int, seed: int) -> Grammar:
    return Grammar(V, depth, b, n, seed)


@functools.lru_cache(maxsize=16)
def _unigram_entropy(V: int, depth: int, b: int, n: int, seed: int) -> float:
    g = _grammar(V, depth, b, n, seed)
    s = g.stream(np.random.default_rng([seed, _ENTROPY_TAG]), _ENTROPY_TOKENS)
    return entropy_of_counts(np.bincount(s, minlength=V))


class PCFGSource(DataSource):
    """Infinite seeded PCFG language; train and val are independent samples of one grammar."""

    def __init__(self, cfg: DataConfig, seq_len: int):
        if seq_len < 1:
            raise DataError(f"seq_len = {seq_len!r} is invalid: it must be at least 1.")
        self.cfg, self.seq_len, self.seed = cfg, seq_len, cfg.seed
        self.vocab_size = cfg.vocab_size
        self._key = (cfg.vocab_size, cfg.pcfg_depth, cfg.branching, cfg.n_nonterminals, cfg.seed)
        self.grammar = _grammar(*self._key)

    def batch(self, split: str, index: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        _check_request(split, index, batch_size)
        rng = self.rng(split, index)
        T = self.seq_len + 1
        need = batch_size * T
        # Draw a little extra and start at a random offset, so the first row does not always
        # begin at a sentence boundary.
        s = self.grammar.stream(rng, need + int(2 * self.grammar.mean_len) + 1)
        off = int(rng.integers(0, len(s) - need + 1))
        w = torch.from_numpy(s[off : off + need].reshape(batch_size, T))
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()

    def unigram_entropy(self) -> float:
        return _unigram_entropy(*self._key)

    def describe(self) -> str:
        g = self.grammar
        return (
            f"PCFG language (seed {self.seed}): vocab {g.vocab_size} = EOS + "
            f"{g.n_brackets} bracket pairs + {g.n_words} words, {g.n} nonterminals, "
            f"depth <= {g.depth}, branching <= {self.cfg.branching}, "
            f"{g.n_rules} rules, mean sentence {g.mean_len:.1f} tokens with EOS, "
            f"entropy rate <= {g.entropy_bound:.3f} nats/token"
        )


def _check_request(split: str, index: int, batch_size: int) -> None:
    """Shared argument checks for batch(); one sentence naming the bad argument."""
    if split not in _SPLIT_ID:
        raise DataError(f"split = {split!r} is unknown; expected 'train' or 'val'.")
    if not isinstance(index, (int, np.integer)) or index < 0:
        raise DataError(f"index = {index!r} is invalid: batch indices are integers >= 0.")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise DataError(f"batch_size = {batch_size!r} is invalid: it must be an integer >= 1.")
