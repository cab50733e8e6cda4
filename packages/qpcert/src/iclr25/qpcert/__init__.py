"""iclr25.qpcert — exact certification of (graph) neural networks against label poisoning (QPCert / LabelCert,
Sabanayagam, Gosch, Günnemann, Ghoshdastidar, ICLR 2025).

Part 1 (learning): closed-form infinite-width NTKs of MLP/GCN/SGC/APPNP/GIN/GraphSAGE (+ skip connections) and the
bias-free kernel SVM they train to. Part 2 (certification): exact sample-wise and collective label-flip
certificates by sorting, enumeration or a mixed-integer linear program (HiGHS, SCIP, scipy).
"""

from .certify import CertificateResult, brute_force_label_flips, certify_curve, certify_label_flips
from .config import ArchSpec, CertifyConfig, CSBMConfig
from .data import Graph, karate_club, make_csbm
from .ntk import arccos_expectations, ntk_matrix
from .svm import KernelSVM

__version__ = "0.1.0"

__all__ = [
    "ArchSpec",
    "CertificateResult",
    "CSBMConfig",
    "CertifyConfig",
    "Graph",
    "KernelSVM",
    "arccos_expectations",
    "brute_force_label_flips",
    "certify_curve",
    "certify_label_flips",
    "karate_club",
    "make_csbm",
    "ntk_matrix",
]
