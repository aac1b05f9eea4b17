"""invoicectl: send UBL e-invoices to the GoRoute Peppol API without losing one or sending one twice."""

__version__ = "0.1.0"
