"""The inbox page of a bare sandbox (no resetgate to ask): every email listed newest first,
an email's own markup never reaches the page as markup (its HTML is shown only inside a
sandboxed iframe, escaped into srcdoc), and resetgate's view is "unknown", never a guess."""

from __future__ import annotations

import aiohttp

from tests.sandbox.conftest import OpenProvider


async def page(base: str, path: str) -> tuple[int, str, str]:
    async with aiohttp.ClientSession() as session, session.get(base + path) as reply:
        return reply.status, reply.headers.get("Content-Security-Policy", ""), await reply.text()


async def test_the_inbox_lists_newest_first_and_escapes_what_an_email_holds(
    open_provider: OpenProvider,
) -> None:
    async with open_provider(delivered_delay_seconds=0.0, bounce_domain="bounce.example") as p:
        assert (await p.send("op-old", to="someone@bounce.example")).status == 200
        hostile = "<script>alert(1)</script>"
        sent = await p.send("op-new", text="go https://game.example/reset?t=abc " + hostile)
        status, policy, text = await page(p.base_url, "/_sandbox/inbox")
        assert status == 200 and policy == "script-src 'none'"
        assert text.index("player@example.com") < text.index("someone@bounce.example")
        assert text.count("class='bounce'") == 1, "the bounced one only"
        assert "<td>unknown</td>" in text, "no resetgate to ask: unknown, not a status"
        status, _, one = await page(p.base_url, f"/_sandbox/inbox/{sent.body['id']}")
        assert status == 200
        assert hostile not in one and "&lt;script&gt;" in one
        assert "href='https://game.example/reset?t=abc'" in one
        status, _, missing = await page(p.base_url, "/_sandbox/inbox/msg_nope")
        assert "No such email" in missing
        status, _, bare = await page(p.base_url, "/_sandbox/messages")  # the old banner URL
        assert status == 400 and "/_sandbox/inbox" in bare
