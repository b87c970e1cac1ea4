/**
 * The built-in billing provider's checkout page. Its URL is the capability: an unguessable
 * session id of one tenant and one plan, valid until it expires (docs/billing.md). Registered in
 * the scope that parses form bodies (app.ts): the page's Confirm button posts a form.
 */
import { AppError } from '@relayplane/contract/errors';
import { CHECKOUT_PATH, checkoutPages, page } from '../html.ts';
import { htmlResponse, pathParams } from '../schemas.ts';
import type { Api, RouteDeps } from './deps.ts';

const NOT_FOUND = htmlResponse('No such open session.');

/** Billing's answer for an unknown or malformed session id: no such page. */
function unknownSession(err: unknown): undefined {
  if (err instanceof AppError && (err.code === 'not_found' || err.code === 'invalid_request'))
    return undefined;
  throw err;
}

export function registerCheckoutPage(forms: Api, { clients }: RouteDeps): void {
  forms.get(
    `${CHECKOUT_PATH}/:id`,
    {
      schema: {
        operationId: 'showCheckout',
        summary: 'Built-in checkout page',
        description: "The built-in provider's confirmation page (HTML) for a checkout session.",
        tags: ['billing'],
        params: pathParams('id'),
        response: { 200: htmlResponse('The confirmation page.'), 404: NOT_FOUND },
      },
    },
    async (request, reply) => {
      const session = await clients.billing
        .getCheckoutSession({ id: request.params.id })
        .then((r) => r.session, unknownSession);
      if (session?.provider !== 'builtin') return page(reply, 404, checkoutPages.unknown);
      if (session.status === 'completed') return page(reply, 200, checkoutPages.changed(session.planId));
      if (session.status !== 'open') return page(reply, 404, checkoutPages.expired);
      return page(reply, 200, checkoutPages.confirm(session.id, session.planId));
    },
  );

  forms.post(
    `${CHECKOUT_PATH}/:id`,
    {
      schema: {
        operationId: 'confirmCheckout',
        summary: 'Confirm a built-in checkout',
        description:
          'Applies the plan change of an open built-in checkout session and shows the result (HTML). ' +
          'A session of a paid plan is not confirmed while `BILLING_BUILTIN_PAID_CHECKOUT` is off (422), ' +
          'even one created while it was on.',
        tags: ['billing'],
        params: pathParams('id'),
        response: {
          200: htmlResponse('The plan changed.'),
          404: NOT_FOUND,
          422: htmlResponse('A paid plan, and paid built-in checkout is off; nothing changed.'),
        },
      },
    },
    async (request, reply) => {
      const done = await clients.billing
        .completeCheckoutSession({ id: request.params.id })
        .catch((err: unknown) => {
          if (err instanceof AppError && err.code === 'unprocessable') return 'paid_checkout_off' as const;
          return unknownSession(err);
        });
      if (done === 'paid_checkout_off') return page(reply, 422, checkoutPages.paidCheckoutOff);
      if (!done?.session) return page(reply, 404, checkoutPages.unknownOrExpired);
      return page(reply, 200, checkoutPages.changedNow(done.session.planId));
    },
  );
}
