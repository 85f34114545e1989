"""The provider's claims: the standard profile ones and a `groups` claim, as an organisation's IdP sends them."""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator


class GroupsClaimValidator(OAuth2Validator):
    oidc_claim_scope = None  # every claim in the ID token and userinfo, whatever the scopes (like a groups mapper)

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "preferred_username": user.username, "email": user.email, "given_name": user.first_name,
            "family_name": user.last_name, "groups": sorted(user.groups.values_list("name", flat=True)),
        }
