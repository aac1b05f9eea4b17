"""invoicectl: send UBL e-invoices to GoRoute without losing one or sending one twice."""

__version__ = "0.1.0"
