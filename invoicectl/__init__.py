"""invoicectl: send UBL e-invoices to GoRoute without losing one or sending one twice."""

__version__ = "0.1.0"

# The brief's base URL; GOROUTE_BASE_URL or the config file override it.
DEFAULT_BASE_URL = "https://app.goroute.ai/peppol-api"
