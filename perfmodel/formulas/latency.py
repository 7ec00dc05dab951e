"""Latency percentiles of a served replica: the wait of a prompt for the prefill under Poisson
arrivals (TTFT) and the spread of a request's time per output token from the decode steps that
carry another request's prefill or prefill chunk (TPOT).

==========  =====================================================================================
lambda      prompts arriving per second at one prefill server (an attention group), Poisson
D           prefill time of one prompt (the server's deterministic service time)
rho         lambda D, the share of time the prefill server is busy
W           a prompt's wait before its prefill starts;  W_bar its mean;  W_q its q-quantile
n           decode steps of a request (output tokens / tokens per step)
r           other requests' prefill stalls (prefills or chunks) per decode step of the request
s           time one stall adds to the step it joins
X           stalled steps of a request, Binomial(n, r)
==========  =====================================================================================

TTFT: a prompt waits for the prefills ahead of it, an M/D/1 queue (Kendall's notation: Poisson
arrivals, deterministic service, one server). Its mean is the Pollaczek-Khinchine formula,
W_bar = lambda E[S^2] / (2 (1 - rho)) = rho D / (2 (1 - rho)) for E[S^2] = D^2 (Pollaczek 1930,
Khinchine 1932; Kleinrock 1975, "Queueing Systems, Vol. 1: Theory", ch. 5, the M/G/1 queue). With
prompt lengths that vary (coefficient of variation c = std / mean) and a prefill time proportional to
the prompt, the service is general with E[S^2] = D^2 (1 + c^2): an M/G/1 queue, whose mean wait is
the same formula times (1 + c^2) (c = 1, exponential service, gives M/M/1's rho D / (1 - rho)). A
Poisson arrival finds the server busy with probability rho (PASTA: Wolff 1982, "Poisson Arrivals
See Time Averages", Oper. Res. 30), and the wait of one that waits is taken as exponential with
the mean that gives W_bar: P(W > t) = rho exp(-rho t / W_bar). This is exact for M/M/1 and is the
heavy-traffic limit of any M/G/1 queue (Kingman 1962, "On queues in heavy traffic", J. R. Stat.
Soc. B 24); at light load, where a prompt that waits mostly waits out one residual prefill
(less than D), it overstates a deterministic server's tail.

TPOT: a request's tokens come from n decode steps; each carries one of the other requests'
prefill stalls with probability r (continuous batching stalls a step for a whole prefill, Yu et al.
2022, Orca; chunked prefill for one chunk, Agrawal et al. 2024, Sarathi-Serve), independently, so
X ~ Binomial(n, r) and the request's TPOT is (n t_step + X s) / O, whose mean is the engine's TPOT.
MLPerf Inference's server constraints are on the 99th percentile of the per-request TTFT and TPOT
(MLCommons inference rules, LLM benchmarks: "TTFT" and "TPOT" latency constraints).
"""

from __future__ import annotations

import math

QUANTILES = {"p50": 0.50, "p99": 0.99}
"""The percentiles the serving engine reports (``ttft_p50_s``, ``ttft_p99_s``, ...)."""


def md1_mean_wait_s(arrival_per_s: float, service_s: float, service_cv: float = 0.0) -> float:
    """Pollaczek-Khinchine mean wait: lambda D^2 (1 + c^2) / (2 (1 - rho)), M/D/1 at c = 0 and M/G/1 with
    a service time of mean D and coefficient of variation c; inf at rho >= 1."""
    lam, D = arrival_per_s, service_s
    rho = lam * D
    return math.inf if rho >= 1 else lam * D * D * (1 + service_cv ** 2) / (2 * (1 - rho))


def wait_quantile_s(q: float, arrival_per_s: float, service_s: float, service_cv: float = 0.0) -> float:
    """The q-quantile of the wait: 0 while 1 - q >= rho (most arrivals find the server free), else
    (W_bar / rho) ln(rho / (1 - q)), from P(W > t) = rho exp(-rho t / W_bar); inf at rho >= 1."""
    rho = arrival_per_s * service_s
    if rho >= 1:
        return math.inf
    if 1 - q >= rho:
        return 0.0
    return md1_mean_wait_s(arrival_per_s, service_s, service_cv) / rho * math.log(rho / (1 - q))


def tpot_quantile_s(q: float, steps: float, stalls_per_step: float, step_s: float, stall_s: float,
                    output_tokens: int) -> float:
    """The q-quantile of a request's TPOT, (n t_step + X s) / O with X ~ Binomial(n, r) stalled steps
    (n rounded up to N whole steps, r scaled to keep the mean n r stalls). At r >= 1 every step
    stalls and the TPOT is its mean, (n t_step + n r s) / O."""
    n, r, O = steps, stalls_per_step, output_tokens
    if r >= 1 or r <= 0:
        return (n * step_s + n * max(r, 0.0) * stall_s) / O
    from scipy.stats import binom   # here: scipy.stats loads scipy.optimize, which predict never needs
    N = math.ceil(n)
    x = float(binom.ppf(q, N, n * r / N))
    return (n * step_s + x * stall_s) / O
