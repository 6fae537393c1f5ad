"""The dealer: tables, betting windows, shoes, cards, decisions and coup resolution."""
