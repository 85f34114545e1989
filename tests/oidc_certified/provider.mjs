// The tests' certified OpenID provider: panva's oidc-provider (OpenID Certified), configured for the portal's tests
// and started by tests/oidc_certified/fixture.py on 127.0.0.1. Everything it needs comes from the environment:
//
//   OIDC_TEST_CLIENT_ID, OIDC_TEST_CLIENT_SECRET   the portal's client (confidential, client_secret_post)
//   OIDC_TEST_REDIRECT_URIS                        its callback URLs, comma-separated
//   OIDC_TEST_USERS_FILE                           JSON {username: {password, groups, email, given_name,
//                                                  family_name}}, read at every sign-in (a test changes groups
//                                                  between sign-ins by rewriting it)
//   OIDC_TEST_CLOCK_OFFSET_SECONDS                 how far the provider's clock runs ahead of (or, negative, behind)
//                                                  the machine's: iat and exp of what it issues move with it
//
// It listens on a port the system picks and prints `listening <issuer>` once it serves.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parse as parseQuery } from 'node:querystring';

import Provider from 'oidc-provider';

const env = (name) => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`${name} is not set`);
  return value;
};

// The clock offset: every time the provider reads (epoch seconds for iat, exp, codes and sessions) comes from
// Date.now, so shifting it shifts the provider's whole clock and nothing else on the machine.
const offsetMs = Number(process.env.OIDC_TEST_CLOCK_OFFSET_SECONDS || '0') * 1000;
if (!Number.isFinite(offsetMs)) throw new Error('OIDC_TEST_CLOCK_OFFSET_SECONDS must be a number');
const machineNow = Date.now.bind(Date);
Date.now = () => machineNow() + offsetMs;

const usersFile = env('OIDC_TEST_USERS_FILE');
const readUsers = () => JSON.parse(readFileSync(usersFile, 'utf8'));
// The subject is opaque, as at a real IdP (the portal keys users on issuer and subject, not on the username).
const subjectOf = (username) => `sub-${Buffer.from(username).toString('hex')}`;
const usernameOf = (subject) => Buffer.from(subject.replace(/^sub-/, ''), 'hex').toString();

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: randomBytes(8).toString('hex'), alg: 'RS256', use: 'sig' };

const html = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const loginPage = (uid, message = '') => `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Sign in</title></head><body>
<h1>Sign in to the test provider</h1>${message ? `<p class="error">${html(message)}</p>` : ''}
<form method="post" action="/interaction/${html(uid)}/login">
<input type="text" name="username" autofocus><input type="password" name="password">
<button type="submit">Sign in</button></form></body></html>`;

const readForm = (req) => new Promise((resolve, reject) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => {
    body += chunk;
    if (body.length > 10000) reject(new Error('form too large'));
  });
  req.on('end', () => resolve(parseQuery(body)));
  req.on('error', reject);
});

const server = createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: [{
      client_id: env('OIDC_TEST_CLIENT_ID'),
      client_secret: env('OIDC_TEST_CLIENT_SECRET'),
      redirect_uris: env('OIDC_TEST_REDIRECT_URIS').split(','),
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
      id_token_signed_response_alg: 'RS256',
    }],
    jwks: { keys: [signingKey] },
    cookies: { keys: [randomBytes(24).toString('hex')] },
    scopes: ['openid', 'email', 'profile', 'groups'],
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['preferred_username', 'name', 'given_name', 'family_name'],
      groups: ['groups'],
    },
    // The ID token carries the claims its scopes ask for (the portal reads them from it; userinfo is optional).
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    // The portal is a first-party client: a signed-in user's consent is implied, as at an organisation's IdP.
    async loadExistingGrant(ctx) {
      const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
      if (grantId) return ctx.oidc.provider.Grant.find(grantId);
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
      grant.addOIDCScope('openid email profile groups');
      await grant.save();
      return grant;
    },
    async findAccount(ctx, subject) {
      const username = usernameOf(subject);
      const user = readUsers()[username];
      if (!user) return undefined;
      return {
        accountId: subject,
        async claims() {
          return {
            sub: subject, preferred_username: username, email: user.email || '', email_verified: true,
            given_name: user.given_name || '', family_name: user.family_name || '',
            name: [user.given_name, user.family_name].filter(Boolean).join(' '), groups: user.groups || [],
          };
        },
      };
    },
    // Sessions and interactions outlive any clock offset a test sets, so a browser keeps their cookies.
    ttl: {
      AuthorizationCode: 60, AccessToken: 600, IdToken: 600, Interaction: 86400, Session: 86400, Grant: 86400,
    },
  });

  // The login step: the user's password from the users file, then back to the authorization endpoint.
  provider.use(async (ctx, next) => {
    const match = ctx.path.match(/^\/interaction\/([\w-]+)(\/login)?$/);
    if (!match) return next();
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    if (ctx.method === 'GET') {
      ctx.type = 'html';
      ctx.body = loginPage(details.uid);
      return undefined;
    }
    if (ctx.method !== 'POST' || !match[2]) return next();
    const form = await readForm(ctx.req);
    const user = readUsers()[form.username];
    if (!user || user.password !== form.password) {
      ctx.status = 401;
      ctx.type = 'html';
      ctx.body = loginPage(details.uid, 'Wrong username or password.');
      return undefined;
    }
    const returnTo = await provider.interactionResult(ctx.req, ctx.res, { login: { accountId: subjectOf(form.username) } });
    ctx.status = 303;
    ctx.redirect(returnTo);
    return undefined;
  });

  server.on('request', provider.callback());
  process.stdout.write(`listening ${issuer}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
