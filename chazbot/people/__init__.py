"""The people an admin allows from chat (``allowed``): a feature of the peer over the
ledger, as reminders are, not a part of the ledger itself."""
