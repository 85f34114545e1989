"""A certified OpenID provider for the single sign-on tests: panva's oidc-provider (npm, pinned in package.json and
package-lock.json here; `npm ci` in this folder installs it, as .ci/run does), configured by provider.mjs."""
