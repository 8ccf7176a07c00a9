"""The reset email as files a studio owns: templates per locale and brand (``files``),
locale negotiation (``locales``), and the checks that stop a service before a broken
template reaches a player (``check``). docs/templates.md is the email team's guide."""
