"""Published constants the project compares against, each with its source (docs/science.md).

Data, not code: every number here is stated in the paper named beside it, and every other module
imports it from here rather than writing it again. Plain dicts and floats, no torch.
"""

from __future__ import annotations

# -- Levine, Wies, Sharir, Bata, Shashua 2020 (NeurIPS; arXiv:2006.12467), docs/science.md §1 ----
THEORY_BASE = 3.0  # each linear-attention layer is a cubic polynomial of its input: L_th = log_3 d
LEVINE_INTERCEPT, LEVINE_SLOPE = 5.039, 0.0555  # ln d*(L) = 5.039 + 0.0555 L (their v3 fit)
LEVINE_FIT_DEPTHS = (6, 48)  # the depths their fit was measured on; outside it is extrapolation
LEVINE_2020 = {
    "source": "Levine et al. 2020, Limits to Depth Efficiencies of Self-Attention, arXiv:2006.12467",
    "theory_base": THEORY_BASE,
    "empirical_width": {
        "a": LEVINE_INTERCEPT,
        "beta": LEVINE_SLOPE,
        "where": "v3 fit d_x*(L) = exp(5.039 + 0.0555 L), N_opt = 12 L d_x*^2",
    },
    "fit_depths": list(LEVINE_FIT_DEPTHS),
    "kaplan_fig6_depths": [1, 2, 3, 6],
}

# -- Kaplan et al. 2020, Scaling Laws for Neural Language Models (arXiv:2001.08361), §2 -------
KAPLAN_2020 = {
    "source": "Kaplan et al. 2020, Scaling Laws for Neural Language Models, arXiv:2001.08361",
    "alpha_N": {"value": 0.076, "N_c": 8.8e13, "where": "Table 5, L(N) = (N_c/N)^alpha_N"},
    "alpha_D": {"value": 0.095, "D_c": 5.4e13, "where": "Table 5"},
    "alpha_S": {"value": 0.76, "S_c": 2.1e3, "where": "Table 5 / Table 3, L(N,S)"},
    "L_N_S": {
        "alpha_N": 0.077,
        "alpha_S": 0.76,
        "N_c": 6.5e13,
        "S_c": 2.1e3,
        "where": "Table 3, L(N,S) = (N_c/N)^alpha_N + (S_c/S_min)^alpha_S",
    },
    "L_N_D": {"alpha_N": 0.076, "alpha_D": 0.103, "N_c": 6.4e13, "D_c": 1.8e13, "where": "Table 2"},
    "shape": {
        "max_loss_increase": 0.03,
        "aspect_ratio_range": 40.0,
        "where": "Figure 5 / §3.1: (n_layer, d_model) = (6, 4288) within 3% of (48, 1600); "
        "aspect ratio varied 40x with little effect",
    },
    "depth": {
        "where": "Figure 6: without embedding parameters depths >= 2 converge to one trend; "
        "1-layer models deviate"
    },
    "setup": {
        "vocab": 50257,
        "n_ctx": 1024,
        "batch_tokens": 512 * 1024,
        "steps": 250_000,
        "where": "§2: WebText2, BPE, Adam, 3000-step warmup then cosine to zero",
    },
    "seed_noise": 0.02,
}
PF_DAY = 8.64e19  # FLOPs in one petaflop/s-day (Kaplan et al. 2020 §1.3)

# -- Hoffmann et al. 2022, Training Compute-Optimal LLMs (arXiv:2203.15556), §8 ----------------
HOFFMANN_2022 = {
    "source": "Hoffmann et al. 2022, Training Compute-Optimal Large Language Models, "
    "arXiv:2203.15556, Approach 3 (eq. 10)",
    "params": {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28},
}

# -- Besiroglu, Erdil, Barnett, You 2024, Chinchilla Scaling: A replication attempt
#    (arXiv:2404.10102), §8: the Figure 4 points refitted without the 5 highest losses -----------
BESIROGLU_2024 = {
    "source": "Besiroglu et al. 2024, Chinchilla Scaling: A replication attempt, arXiv:2404.10102",
    "params": {"E": 1.8172, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658},
    "se": {"E": 0.03, "A": 124.58, "B": 1293.23, "alpha": 0.02, "beta": 0.02},
    "compute_optimal_a": 0.513,
    "method": "log-space Huber (delta 1e-3), L-BFGS from a grid of starts, 4000 bootstrap "
    "refits, the 5 highest-loss points of 245 dropped",
}

# -- Kerg et al. 2020, Untangling tradeoffs between recurrence and self-attention (NeurIPS), §6 ---
KERG_2020 = {
    "source": "Kerg et al. 2020, Untangling tradeoffs between recurrence and self-attention in "
    "neural networks, NeurIPS 2020 (defaults of the authors' public code)",
    "copy": {
        "hidden": 128,
        "nu": 10,
        "rho": 15,
        "lr": 1e-3,
        "lr_T1000": 2e-4,
        "batch_size": 10,
        "grad_clip": 1.0,
    },
    "denoise": {"hidden": 128, "nu": 15, "rho": 15},
    "claims": {"solves_up_to_T": 1000, "lstm_fails_beyond_T": 500, "stable_rho": 15, "unstable_rho": 3},
}

# -- McLeish et al. 2025, Gemstones (arXiv:2502.06857), §9 --------------------------------------
GEMSTONES_2025 = {
    "source": "McLeish et al. 2025, Gemstones: A Model Suite for Multi-Faceted Scaling Laws, "
    "arXiv:2502.06857",
    "widths": (256, 3072),
    "depths": (3, 80),
    "tokens": 350e9,
    "vocab": 50_000,
    "law": "L(w, d, D) = E + A*w^-a + B*d^-b + C*D^-c",
}
