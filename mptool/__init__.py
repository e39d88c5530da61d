"""mptool: membership-privacy audits of machine-learning classifiers.

The metrics follow Long, Bindschaedler & Gunter, *Towards Measuring Membership Privacy*
(pointwise differential training privacy, PDTP; DTP-1).
"""

__version__ = "0.1.0"
