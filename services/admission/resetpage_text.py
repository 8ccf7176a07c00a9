"""The local reset page's words, per locale, and the one that answers a browser.

The page is the game's in production; locally it speaks the player's language as the email
did, picked from the browser's ``Accept-Language`` (RFC 9110 section 12.5.4) by the same
BCP 47 lookup the emails use (shared.emails.locales). A language with no entry here reads
English. The translations are the team's, not yet reviewed by native speakers.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.admission.internal import REFUSED
from shared.emails.locales import negotiate
from shared.scripts.admission import ConsumeResult

DEFAULT = "en"
_MAX_HEADER = 512  # what of Accept-Language is read; the rest is ignored
_MAX_RANGES = 16


@dataclass(frozen=True, slots=True)
class PageText:
    title: str
    heading: str
    password: str
    submit: str
    footer: str
    incomplete_link: str
    incomplete_form: str
    refused: str  # "...: {why}."
    done: str
    why: dict[ConsumeResult, str]


# One locale a block, a sentence a line: the formatter would fold the refusals' table.
TEXTS: dict[str, PageText] = {
    "en": PageText(
        "Reset your password (local)", "Reset your password", "New password",
        "Set the new password",
        "resetgate local reset page: the game serves this page in production.",
        "This link is incomplete: open the whole link from the email.",
        "The form came back incomplete: open the link from the email.",
        "This link does not work: {why}.",
        "Done: the link worked and is now used up. (A game would save the new password "
        "here; this local page keeps nothing.)",
        {result: message for result, (_, _, message) in REFUSED.items()},  # the API's words
    ),
    "fr": PageText(
        "Réinitialiser votre mot de passe (local)", "Réinitialiser votre mot de passe",
        "Nouveau mot de passe", "Enregistrer le nouveau mot de passe",
        "Page de réinitialisation locale de resetgate : en production, le jeu sert cette page.",
        "Ce lien est incomplet : ouvrez le lien complet depuis l'e-mail.",
        "Le formulaire est revenu incomplet : ouvrez le lien depuis l'e-mail.",
        "Ce lien ne fonctionne pas : {why}.",
        "C'est fait : le lien a fonctionné et ne peut plus servir. (Un jeu enregistrerait "
        "ici le nouveau mot de passe ; cette page locale ne garde rien.)",
        {ConsumeResult.MISSING: "cette demande de réinitialisation n'existe pas",
         ConsumeResult.INVALID: "ce lien n'appartient pas à cette demande",
         ConsumeResult.USED: "ce lien a déjà été utilisé",
         ConsumeResult.EXPIRED: "ce lien a expiré ; demandez une nouvelle réinitialisation",
         ConsumeResult.SUPERSEDED: "une demande plus récente a été faite ; seul son lien "
                                   "fonctionne"},
    ),
    "de": PageText(
        "Passwort zurücksetzen (lokal)", "Passwort zurücksetzen", "Neues Passwort",
        "Neues Passwort festlegen",
        "Lokale Zurücksetzungsseite von resetgate: im Betrieb liefert das Spiel diese Seite.",
        "Dieser Link ist unvollständig: Öffne den ganzen Link aus der E-Mail.",
        "Das Formular kam unvollständig zurück: Öffne den Link aus der E-Mail.",
        "Dieser Link funktioniert nicht: {why}.",
        "Erledigt: Der Link hat funktioniert und ist jetzt verbraucht. (Ein Spiel würde hier "
        "das neue Passwort speichern; diese lokale Seite speichert nichts.)",
        {ConsumeResult.MISSING: "diese Anfrage gibt es nicht",
         ConsumeResult.INVALID: "der Link gehört nicht zu dieser Anfrage",
         ConsumeResult.USED: "der Link wurde bereits verwendet",
         ConsumeResult.EXPIRED: "der Link ist abgelaufen; fordere eine neue Zurücksetzung an",
         ConsumeResult.SUPERSEDED: "eine neuere Anfrage wurde gestellt; nur ihr Link "
                                   "funktioniert"},
    ),
    "es": PageText(
        "Restablecer tu contraseña (local)", "Restablecer tu contraseña", "Nueva contraseña",
        "Guardar la nueva contraseña",
        "Página de restablecimiento local de resetgate: en producción la sirve el juego.",
        "Este enlace está incompleto: abre el enlace completo del correo.",
        "El formulario volvió incompleto: abre el enlace del correo.",
        "Este enlace no funciona: {why}.",
        "Listo: el enlace funcionó y ya está usado. (Un juego guardaría aquí la nueva "
        "contraseña; esta página local no guarda nada.)",
        {ConsumeResult.MISSING: "no existe esta solicitud de restablecimiento",
         ConsumeResult.INVALID: "el enlace no pertenece a esta solicitud",
         ConsumeResult.USED: "el enlace ya se ha usado",
         ConsumeResult.EXPIRED: "el enlace ha caducado; solicita un nuevo restablecimiento",
         ConsumeResult.SUPERSEDED: "se pidió un restablecimiento más reciente; solo funciona "
                                   "su enlace"},
    ),
}  # fmt: skip


def ranges(header: str) -> list[str]:
    """The language ranges of an Accept-Language header, most wanted first (q=0 dropped);
    a malformed weight counts as 1, as an absent one does."""
    weighted = []
    for order, part in enumerate(header[:_MAX_HEADER].split(",")[:_MAX_RANGES]):
        tag, _, params = part.strip().partition(";")
        weight = 1.0
        name, _, value = params.strip().partition("=")
        if name.strip() == "q":
            try:
                weight = float(value)
            except ValueError:
                weight = 1.0
        if tag and tag != "*" and weight > 0:
            weighted.append((-weight, order, tag))
    return [tag for _, _, tag in sorted(weighted)]


def for_browser(accept_language: str) -> tuple[str, PageText]:
    """The locale (and its words) that reads best for a browser asking ``accept_language``."""
    for tag in ranges(accept_language):
        locale = negotiate(tag, TEXTS, "")
        if locale:
            return locale, TEXTS[locale]
    return DEFAULT, TEXTS[DEFAULT]
