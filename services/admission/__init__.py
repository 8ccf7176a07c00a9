"""The admission service: the public "forgot password" endpoint and the internal support API.

Every entry point converges through :class:`shared.admit.Admitter`, so resend clicks,
agents and automation all land on the account's one live operation.
"""
