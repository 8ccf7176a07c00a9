"""router: turns contact-form events into support cases, converging account-access topics
on the account's recovery operation through the admission logic (never a send of its own)."""
