"""The weekly review job: one run ingests what is new and renders a week's pages through the api."""
