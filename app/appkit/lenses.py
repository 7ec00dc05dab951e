"""What each of the product's four lenses means, in words for the page."""

LENS_TEXT = {
    "amortisation": "fixed per-step costs (optimizer, kernel launches, synchronisation, input wait) "
                    "are not spread over enough work; a larger batch per GPU or fewer steps amortises them.",
    "co-design": "the arithmetic itself bounds the step: kernels, precision and the GPU's peak FLOP/s and "
                 "HBM bandwidth decide it (see the roofline).",
    "balanced pipeline": "stages wait on one another: more micro-batches, interleaving (vpp) or fewer "
                         "pipeline stages shrink the bubble (see the timeline).",
    "scale serves purpose": "communication added by a parallel degree costs more than the degree buys; "
                            "a smaller degree, better overlap or a faster fabric helps.",
}
