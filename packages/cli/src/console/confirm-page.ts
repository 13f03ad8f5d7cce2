/** The page between a verb's button and the change: what it will do, and a form that carries the token. */
import { html } from "hono/html";

/**
 * A confirmation page. `token` is the action token when this browser holds
 * it (then the form can be sent), `null` when it does not (then the page
 * says how to enable actions instead of offering a form).
 */
export function confirmPage(options: {
  title: string;
  question: string;
  action: string;
  fields: Record<string, string>;
  cancelHref: string;
  token: string | null;
}) {
  const { title, question, action, fields, cancelHref, token } = options;
  return html`<h1>${title}</h1>
    <article>
      <p>${question}</p>
      ${
        token === null
          ? html`<p>This browser does not hold the console's action token. Open the address with
              <code>?token=…</code> that <code>idempo console --allow-actions</code> printed at start-up.</p>`
          : html`<form method="post" action="${action}">
              ${Object.entries(fields).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}" />`)}
              <input type="hidden" name="token" value="${token}" />
              <button type="submit">Confirm: ${title}</button>
            </form>`
      }
      <p><a href="${cancelHref}">Cancel</a></p>
    </article>`;
}
